"""Print the e2e tier's one-line summary from RUN_DIR/results.json and differential.json;
exit 1 when a scenario did not pass or a state mismatched."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(run_dir: Path) -> int:
    try:
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        results = {"scenarios": 0, "passed": 0}
    try:
        differential = json.loads((run_dir / "differential.json").read_text())
    except (OSError, ValueError):
        differential = {"states": 0, "mismatches": 0, "failed": True}
    print(f"e2e: {results['passed']}/{results['scenarios']} scenarios pass; differential: "
          f"{differential['states']} states, {differential['mismatches']} mismatches")
    # Which situations the differential's states covered (a class at 0 is not listed).
    for name, count in (differential.get("classes") or {}).items():
        print(f"  differential states: {count:4d}  {name}")
    bad = (results["passed"] != results["scenarios"] or not results["scenarios"]
           or differential["mismatches"] or differential.get("failed"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
