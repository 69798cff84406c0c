"""Print the e2e tier's summary from RUN_DIR/results.json and the differential runs'
results (differential.json, differential-lws.json, differential-rollouts.json,
differential-cloneset.json); exit 1 when a scenario did not pass, a differential wrote no
results or a state mismatched (a missed denial is a mismatch: tests/e2e/rule_judge.py).

Under the line, per kind, the denials where no real deletion broke a rule (over-denials)
and the allowed scale-downs whose real deletions broke one (missed denials); each
differential's precision (those, and how often plan could name no pod that surely
survives); and the classes of states the main differential covered."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
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
    for line in _per_kind(runs.values()):
        print(line)
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


def _per_kind(runs: Iterable[dict[str, Any]]) -> list[str]:
    """Over-denials and missed denials per workload kind, over every differential run."""
    kinds: dict[str, dict[str, int]] = {}
    for run in runs:
        for kind, counts in (run.get("byKind") or {}).items():
            each = kinds.setdefault(kind, {})
            for key, value in counts.items():
                each[key] = each.get(key, 0) + value
    if not kinds:
        return []
    return [f"  {what} per kind: " + ", ".join(
        f"{kind} {counts[key]} of {counts['states']}" for kind, counts in kinds.items())
        for what, key in (("over-denials (plan denied, the real deletions broke no rule)",
                           "overDenials"),
                          ("missed denials (plan allowed, the real deletions broke a rule)",
                           "missedDenials"))]


def _differential(path: Path) -> dict[str, Any]:
    """A differential run's results; a run that wrote none failed."""
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {"states": 0, "mismatches": 0, "failed": True}


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
