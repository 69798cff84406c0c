"""Print the e2e tier's one-line summary from RUN_DIR/results.json, differential.json and
differential-lws.json; exit 1 when a scenario did not pass or a state mismatched."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def main(run_dir: Path) -> int:
    try:
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        results = {"scenarios": 0, "passed": 0}
    differential = _differential(run_dir / "differential.json")
    lws = _differential(run_dir / "differential-lws.json")
    print(f"e2e: {results['passed']}/{results['scenarios']} scenarios pass; differential: "
          f"{differential['states']} states, {differential['mismatches']} mismatches; "
          f"LWS differential: {lws['states']} states, {lws['mismatches']} mismatches")
    bad = (results["passed"] != results["scenarios"] or not results["scenarios"]
           or any(d["mismatches"] or d.get("failed") for d in (differential, lws)))
    return 1 if bad else 0


def _differential(path: Path) -> dict[str, Any]:
    """A differential run's results; a run that wrote none failed."""
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {"states": 0, "mismatches": 0, "failed": True}


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
