"""`plan --state` from YAML against JSON: the same 10,000-pod state in both forms.

The state is bench_core's 10,000-pod Deployment, written as `kubectl get -o yaml` and
`-o json` write it (one kind: List). `plan` runs as users run it, a fresh process per
run, three runs of each form in turn; the figure is the median CPU time (user + system)
of the process, which another job on the machine slows less than the wall clock, and
its peak resident memory. The YAML/JSON ratio is judged against 3x.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from .bench_core import cluster_objects
from .results import record

PODS = 10_000
RUNS = 3
RATIO_GOAL = 3.0


def write_states(directory: Path) -> dict[str, Path]:
    """The state as YAML and as JSON, each as kubectl writes it. Written by a child
    process: a `plan` forked from this one would otherwise count the objects built here
    in its peak memory."""
    paths = {"yaml": directory / "state.yaml", "json": directory / "state.json"}
    writer = multiprocessing.get_context("spawn").Process(target=_write, args=(paths,))
    writer.start()
    writer.join()
    if writer.exitcode != 0:
        raise RuntimeError(f"writing the states failed (exit code {writer.exitcode})")
    return paths


def _write(paths: dict[str, Path]) -> None:
    document = {"apiVersion": "v1", "kind": "List", "items": cluster_objects(PODS)}
    paths["yaml"].write_text(yaml.dump(document, Dumper=yaml.CSafeDumper, sort_keys=False))
    paths["json"].write_text(json.dumps(document, indent=4))


def plan_cost(state: Path) -> tuple[float, float]:
    """CPU seconds and peak MB of one `plan` of the state's Deployment, 10% down."""
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "webhook", "plan", "--state", str(state), "--workload",
             "deploy/ml/serve", "--replicas", str(PODS * 9 // 10), "-o", "json"],
            stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"plan --state {state} failed: {errors.read().decode().strip()}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    print(f"plan --state: a {PODS:,}-pod state from YAML and from JSON, {RUNS} runs each "
          "(median CPU time of the process)")
    with tempfile.TemporaryDirectory() as tmp:
        states = write_states(Path(tmp))
        sizes = {form: path.stat().st_size / 1e6 for form, path in states.items()}
        times: dict[str, list[float]] = {"yaml": [], "json": []}
        peaks: dict[str, list[float]] = {"yaml": [], "json": []}
        for _ in range(RUNS):
            for form in ("json", "yaml"):
                cpu, peak = plan_cost(states[form])
                times[form].append(cpu)
                peaks[form].append(peak)
    median = {form: statistics.median(values) for form, values in times.items()}
    for form in ("json", "yaml"):
        record(f"plan --state, {PODS:,}-pod state as {form.upper()} ({sizes[form]:.1f} MB)",
               f"{median[form]:.2f} s CPU (runs {', '.join(f'{t:.2f}' for t in times[form])}; "
               f"peak {max(peaks[form]):.0f} MB)",
               "informative: the ratio below is judged", None)
    ratio = median["yaml"] / median["json"]
    record(f"plan --state, {PODS:,}-pod state: YAML / JSON CPU time", f"x{ratio:.2f}",
           f"YAML within {RATIO_GOAL:.0f}x the JSON time", ratio <= RATIO_GOAL)


if __name__ == "__main__":
    main()
