"""Soak: a mixed admission load on `serve`, stepped up until the machine stops keeping up.

Three `hey` processes run at once for each step: pods CREATE (60% of the rate), pods/binding
(30%) and scale reviews (10%), each from several keep-alive HTTPS clients. Every step is
bounded in time; traffic goes to 127.0.0.1 only. Then two faults under load: a worker
killed with SIGKILL, and three certificate rotations. Prints requests, non-200 answers,
transport errors, p50/p99/max per endpoint, and worker restarts.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support import factories as f
from tests.support import reviews
from tests.support.serving import rotate, running_server, worker_pids

from . import heyrun

ROOT = Path(__file__).resolve().parent.parent

STEP_SECONDS = int(os.environ.get("SOAK_SECONDS", "10"))
RATES = [int(r) for r in os.environ.get("SOAK_RATES", "300,600,1200,2400,0").split(",")]
MIX = {"/mutate-pods": (0.6, 6), "/mutate-bindings": (0.3, 3), "/validate-scale": (0.1, 2)}


def bodies(directory: Path) -> dict[str, Path]:
    documents = {
        "/mutate-pods": reviews.pod_create(f.pod("soak", node_name="gpu-hyb-1")),
        "/mutate-bindings": reviews.binding("gpu-probe-2abcd", "gpu-inf-2"),
        "/validate-scale": reviews.scale("deployments", "llm-serve", 6, 3),
    }
    paths = {}
    for endpoint, document in documents.items():
        paths[endpoint] = directory / (endpoint.strip("/") + ".json")
        paths[endpoint].write_text(json.dumps(document))
    return paths


def start_step(url: str, paths: dict[str, Path], rate: int) -> dict[str, Any]:
    """One hey per endpoint, all at once; `rate` 0 means as fast as they can."""
    return {endpoint: heyrun.start(url + endpoint, paths[endpoint], clients, STEP_SECONDS,
                                   rate * share / clients if rate else 0)
            for endpoint, (share, clients) in MIX.items()}


def finish_step(processes: dict[str, Any]) -> dict[str, heyrun.LoadResult]:
    return {endpoint: heyrun.finish(process, STEP_SECONDS + 60)
            for endpoint, process in processes.items()}


def show(title: str, results: dict[str, heyrun.LoadResult]) -> tuple[float, int]:
    total = sum(r.requests for r in results.values())
    bad = sum(r.non_200 + r.failed_transport for r in results.values())
    print(f"{title}: {total / STEP_SECONDS:7.0f} req/s achieved, {bad} failed")
    for endpoint, r in results.items():
        print(f"    {endpoint:<18} {r.requests:7d} req  non-200 {r.non_200:3d}  "
              f"transport errors {r.failed_transport:3d}  p50 {r.p50:6.2f} ms  "
              f"p99 {r.p99:7.2f} ms  max {r.slowest:7.2f} ms")
        for message, count in list(r.errors.items())[:3]:
            print(f"        {count} x {message[:100]}")
    return total / STEP_SECONDS, bad


def worker_boots(log: Path) -> int:
    return log.read_text().count("Booting worker")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        paths = bodies(directory)
        with running_server(directory / "server", "--state",
                            str(ROOT / "examples" / "cluster-state.yaml"),
                            workers=1) as (url, _, master):
            url = url.replace("https://localhost:", "https://127.0.0.1:")  # hey: no ::1 tries
            log = directory / "server" / "server.log"
            print(f"soak: {STEP_SECONDS}s per step, mix {', '.join(MIX)} at 60/30/10%")
            sustained = 0.0
            for rate in RATES:
                achieved, bad = show(f"  target {rate or 'unlimited'} req/s",
                                     finish_step(start_step(url, paths, rate)))
                if bad == 0 and (rate == 0 or achieved >= 0.95 * rate):
                    sustained = max(sustained, achieved)
            print(f"  highest rate sustained with zero failures: {sustained:.0f} req/s")

            victim = worker_pids(master.pid)[0]
            processes = start_step(url, paths, 0)
            time.sleep(STEP_SECONDS / 3)
            os.kill(victim, signal.SIGKILL)
            show("  worker SIGKILLed under unlimited load", finish_step(processes))

            processes = start_step(url, paths, 0)
            for _ in range(3):
                time.sleep(STEP_SECONDS / 4)
                rotate(directory / "server")
            show("  3 certificate rotations under unlimited load", finish_step(processes))
            print(f"  worker restarts: {worker_boots(log) - 1} (1 expected, from the SIGKILL)")


if __name__ == "__main__":
    main()
