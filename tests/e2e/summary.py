"""Print the e2e tier's summary from RUN_DIR/results.json and the differential runs'
results (differential.json, differential-lws.json, differential-rollouts.json,
differential-cloneset.json); exit 1 when a scenario did not pass, a differential wrote no
results or a state mismatched.

Under the line, each differential's precision (how often plan found a violation the real
deletions did not commit, and how often it could name no pod that surely survives) and the
classes of states the main differential covered."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DIFFERENTIALS = {  # label -> results file in RUN_DIR
    "differential": "differential.json",
    "LWS differential": "differential-lws.json",
    "rollouts differential": "differential-rollouts.json",
    "cloneset differential (kruise v1.8.0)": "differential-cloneset.json",
}


def main(run_dir: Path) -> int:
    try:
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        results = {"scenarios": 0, "passed": 0}
    runs = {label: _differential(run_dir / name) for label, name in DIFFERENTIALS.items()}
    counts = "; ".join(f"{_label(label, run)}: {run['states']} states, "
                       f"{run['mismatches']} mismatches" for label, run in runs.items())
    print(f"e2e: {results['passed']}/{results['scenarios']} scenarios pass; {counts}")
    for label, run in runs.items():
        for name, count in (run.get("precision") or {}).items():
            print(f"  {label} precision: {count:4d} of {run['states']}  {name}")
    # Which situations the differential's states covered (a class at 0 is not listed).
    precision = set(runs["differential"].get("precision") or {})
    for name, count in (runs["differential"].get("classes") or {}).items():
        if name not in precision:
            print(f"  differential states: {count:4d}  {name}")
    bad = (results["passed"] != results["scenarios"] or not results["scenarios"]
           or any(run["mismatches"] or run.get("failed") for run in runs.values()))
    return 1 if bad else 0


def _label(label: str, run: dict[str, Any]) -> str:
    """The label, with the version of the real controller the run compared against."""
    return f"{label} (argo-rollouts {run['version']})" if run.get("version") else label


def _differential(path: Path) -> dict[str, Any]:
    """A differential run's results; a run that wrote none failed."""
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {"states": 0, "mismatches": 0, "failed": True}


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
