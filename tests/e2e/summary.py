"""Print the e2e tier's one-line summary from RUN_DIR/results.json, differential.json and
differential-rollouts.json; exit 1 when a scenario did not pass or a state mismatched."""

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
    rollouts = _differential(run_dir / "differential-rollouts.json")
    print(f"e2e: {results['passed']}/{results['scenarios']} scenarios pass; differential: "
          f"{differential['states']} states, {differential['mismatches']} mismatches; "
          f"rollouts differential: {rollouts['states']} states, "
          f"{rollouts['mismatches']} mismatches")
    bad = (results["passed"] != results["scenarios"] or not results["scenarios"]
           or any(d["mismatches"] or d.get("failed") for d in (differential, rollouts)))
    return 1 if bad else 0


def _differential(path: Path) -> dict[str, Any]:
    """A differential run's results; a missing or unreadable file is a failed run."""
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {"states": 0, "mismatches": 0, "failed": True}


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
