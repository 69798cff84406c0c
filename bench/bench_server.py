"""HTTP benchmark: the webhook as `serve` starts it, against an allow-all baseline.

Drives both with `hey` (8 concurrent keep-alive HTTPS clients), first flat out, then at a
fixed 200 requests/s, and prints requests/s, p50 and p99 and their ratios. Then times a
scale check of a 5,000-pod Deployment through the HTTP path, and compares gunicorn's
gthread and sync workers. Loopback only; every run is bounded in time.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import requests
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support
sys.path.insert(0, str(ROOT / "bench"))

import heyrun  # noqa: E402
from bench_core import cluster_objects  # noqa: E402

from tests.support import factories as f  # noqa: E402
from tests.support import reviews  # noqa: E402
from tests.support.serving import running_server  # noqa: E402

DURATION = "4s"
ROUNDS = 3  # alternate the two servers so background load hits both alike
STATE = ROOT / "examples" / "cluster-state.yaml"


def hey(url: str, body: Path, *extra: str) -> heyrun.LoadResult:
    """8 keep-alive clients for DURATION (or `-n N` requests in `extra`)."""
    if extra and extra[0] == "-n":
        return heyrun.finish(subprocess.Popen(
            ["hey", "-c", "8", "-m", "POST", "-T", "application/json", "-D", str(body), *extra,
             url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    rate = float(extra[1]) if extra and extra[0] == "-q" else 0
    return heyrun.run(url, body, 8, float(DURATION.rstrip("s")), rate)


def _median(results: list[heyrun.LoadResult]) -> heyrun.LoadResult:
    middle = heyrun.LoadResult()
    for name in ("rps", "p50", "p99", "slowest"):
        setattr(middle, name, statistics.median(getattr(r, name) for r in results))
    for r in results:
        for code, count in r.statuses.items():
            middle.statuses[code] = middle.statuses.get(code, 0) + count
        for message, count in r.errors.items():
            middle.errors[message] = middle.errors.get(message, 0) + count
    return middle


def show(name: str, result: heyrun.LoadResult) -> None:
    print(f"  {name:<38} {result.rps:6.0f} req/s  p50 {result.p50:6.2f} ms  "
          f"p99 {result.p99:6.2f} ms  non-200 or failed: "
          f"{result.non_200 + result.failed_transport}")


def start_allow_all(stack: ExitStack, directory: Path, worker_class: str, workers: int) -> str:
    from serving import free_port, make_certs

    tls = make_certs(directory)
    port = free_port()
    log = stack.enter_context((directory / "allow.log").open("w"))
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "allow_all_server.py"), "--cert", str(tls["cert"]),
         "--key", str(tls["key"]), "--host", "127.0.0.1", "--port", str(port),
         "--worker-class", worker_class, "--workers", str(workers)],
        stdout=log, stderr=subprocess.STDOUT)
    stack.callback(process.wait, 15)
    stack.callback(process.terminate)
    for _ in range(200):
        try:
            requests.get(f"https://127.0.0.1:{port}/healthz", verify=str(tls["ca"]),
                         timeout=1)
            break
        except requests.RequestException:
            time.sleep(0.1)
    return f"https://127.0.0.1:{port}"


def compare(directory: Path, worker_class: str, workers: int) -> None:
    """The webhook and the allow-all baseline under the same settings, runs alternating."""
    body = directory / "pod.json"
    body.write_text(json.dumps(reviews.pod_create(f.pod("bench", node_name="gpu-hyb-1"))))
    label = f"[{worker_class} x{workers}]"
    with ExitStack() as stack:
        url, _, _ = stack.enter_context(running_server(
            directory / "real", "--state", str(STATE), "--worker-class", worker_class,
            workers=workers))
        base = start_allow_all(stack, directory / "allow", worker_class, workers)
        hey(url + "/mutate-pods", body, "-n", "200")  # warm up both
        hey(base + "/allow-all", body, "-n", "200")
        rounds = [(hey(url + "/mutate-pods", body), hey(base + "/allow-all", body))
                  for _ in range(ROUNDS)]
        mutate, allow = (_median([r[i] for r in rounds]) for i in (0, 1))
        show(f"{label} /mutate-pods", mutate)
        show(f"{label} allow-all baseline", allow)
        print(f"  {label} mutate/allow-all throughput: {mutate.rps / allow.rps * 100:.0f}%")
        if worker_class == "gthread" and workers == 2:
            paced = hey(url + "/mutate-pods", body, "-q", "25")
            show(f"{label} /mutate-pods at 8 x 25 req/s", paced)


def scale_check(directory: Path) -> None:
    objects = cluster_objects(5000)
    state = directory / "big.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects},
                                    sort_keys=False))
    with running_server(directory / "scale", "--state", str(state), workers=1,
                        ready_timeout=120) as (url, ca, _):
        session = requests.Session()
        session.verify, session.trust_env = str(ca), False
        timings = {}
        for target in (4900, 4500, 2500):
            body = reviews.scale("deployments", "serve", 5000, target)
            samples = []
            for _ in range(5):
                started = time.perf_counter()
                answer = session.post(url + "/validate-scale", json=body, timeout=60)
                samples.append((time.perf_counter() - started) * 1000)
                assert answer.status_code == 200
            timings[target] = statistics.median(samples)
        for target, ms in timings.items():
            print(f"  scale check 5,000 -> {target:>5} pods via HTTPS: {ms:7.1f} ms (median of 5)")


def main() -> None:
    if shutil.which("hey") is None:
        sys.exit("hey is not installed: `apt-get install hey` (make bench does this)")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        print("server: pods CREATE reviews, 8 concurrent keep-alive HTTPS clients, medians of "
              f"{ROUNDS} alternating {DURATION} runs")
        # One worker compares the per-request cost fairly; with two, the ratio also
        # depends on how the 8 kept-alive connections happen to spread over the workers.
        for worker_class, workers in (("gthread", 1), ("gthread", 2), ("sync", 2)):
            (directory / f"{worker_class}{workers}").mkdir()
            compare(directory / f"{worker_class}{workers}", worker_class, workers)
        scale_check(directory)


if __name__ == "__main__":
    main()
