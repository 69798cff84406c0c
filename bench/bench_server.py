"""HTTP benchmark: the pods CREATE path against the Go reference webhook and an allow-all app.

In one run, on one machine, with the same body and the same load (8 concurrent keep-alive
HTTPS clients, `hey`): the Go standard-library reference webhook (../shared/reference-webhook,
built here with `go build`), `serve` with its defaults, and an allow-all Flask app under the
same gunicorn settings. Prints requests/s, p50 and p99, and the ratios to the reference.
Then the worker models tried and what one replica carries at p99 <= 10 ms (scale checks
of a 10,000-pod Deployment: bench_scalecheck.py). Loopback only; every run is bounded in
time.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import requests

from tests.support import factories as f
from tests.support import reviews
from tests.support.serving import running_server, stop_group

from . import heyrun
from .results import record

ROOT = Path(__file__).resolve().parent.parent

DURATION = "4s"
ROUNDS = 3  # alternate the two servers so background load hits both alike
STATE = ROOT / "examples" / "cluster-state.yaml"


def hey(url: str, body: Path, *extra: str) -> heyrun.LoadResult:
    """8 keep-alive clients for DURATION (or `-n N` requests in `extra`).

    Always to 127.0.0.1: hey resolves `localhost` to ::1 first as well, which the servers
    do not listen on, and that measured slower for every server.
    """
    url = url.replace("https://localhost:", "https://127.0.0.1:")
    if extra and extra[0] == "-n":
        return heyrun.finish(subprocess.Popen(
            ["hey", "-c", "8", "-m", "POST", "-T", "application/json", "-D", str(body), *extra,
             url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    rate = float(extra[1]) if extra and extra[0] == "-q" else 0
    return heyrun.run(url, body, 8, float(DURATION.rstrip("s")), rate)


def _median(results: list[heyrun.LoadResult]) -> heyrun.LoadResult:
    middle = heyrun.LoadResult()
    for name in ("rps", "p50", "p99", "slowest", "cpu_us"):
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


def start_allow_all(stack: ExitStack, directory: Path, worker_class: str,
                    workers: int) -> tuple[str, int]:
    """The allow-all app's base URL and its gunicorn master's pid."""
    from tests.support.serving import free_port, make_certs

    tls = make_certs(directory)
    port = free_port()
    log = stack.enter_context((directory / "allow.log").open("w"))
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.allow_all_server", "--cert", str(tls["cert"]),
         "--key", str(tls["key"]), "--host", "127.0.0.1", "--port", str(port),
         "--worker-class", worker_class, "--workers", str(workers)],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    stack.callback(stop_group, process, 15)
    for _ in range(200):
        try:
            requests.get(f"https://127.0.0.1:{port}/healthz", verify=str(tls["ca"]),
                         timeout=1)
            break
        except requests.RequestException:
            time.sleep(0.1)
    return f"https://127.0.0.1:{port}", process.pid


def tree_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by `pid` and its child processes."""
    total, pending = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
        pending += [int(child) for child in children]
    return total


def hey_cpu(url: str, body: Path, pid: int) -> heyrun.LoadResult:
    """`hey` as above, plus the server's CPU time per answered request (µs), which the
    machine's other load does not change the way it changes requests/s."""
    before = tree_cpu_seconds(pid)
    result = hey(url, body)
    result.cpu_us = (tree_cpu_seconds(pid) - before) / max(result.requests, 1) * 1e6
    return result


REFERENCE_PORT = 9443  # fixed in the reference's main.go
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "poolguard-bench"


def reference_source() -> Path:
    """../shared/reference-webhook, seen from the main checkout or from a worktree."""
    if os.environ.get("REFERENCE_WEBHOOK_DIR"):
        return Path(os.environ["REFERENCE_WEBHOOK_DIR"])
    for candidate in (ROOT.parent / "shared" / "reference-webhook",
                      ROOT.parent.parent / "shared" / "reference-webhook"):
        if (candidate / "main.go").is_file():
            return candidate
    sys.exit("the Go reference webhook (../shared/reference-webhook) is not there")


def build_reference() -> Path:
    """`go build` the reference into the cache (outside the repository), once per source."""
    source = reference_source()
    binary = CACHE / "reference-webhook"
    newest = max(p.stat().st_mtime for p in source.iterdir())
    if binary.is_file() and binary.stat().st_mtime >= newest:
        return binary
    if shutil.which("go") is None:
        sys.exit("go is not installed: it builds the reference webhook")
    build = CACHE / "src"
    shutil.rmtree(build, ignore_errors=True)
    shutil.copytree(source, build)
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=build, check=True,
                   env={**os.environ, "GOFLAGS": "-mod=mod"})
    return binary


def wait_healthy(url: str, ca: Path, process: subprocess.Popen, path: str) -> None:
    for _ in range(200):
        if process.poll() is not None:
            sys.exit(f"{url} exited at start")
        try:
            requests.post(url + path, data=b"{}", verify=str(ca), timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.1)
    sys.exit(f"{url} did not come up")


def start_reference(stack: ExitStack, directory: Path) -> tuple[str, int]:
    """The reference's /mutate URL and its pid."""
    from tests.support.serving import make_certs

    tls = make_certs(directory)
    (directory / "cert.pem").write_bytes(tls["cert"].read_bytes())
    (directory / "key.pem").write_bytes(tls["key"].read_bytes())
    log = stack.enter_context((directory / "reference.log").open("w"))
    # In a session of its own, as `serve` runs (running_server): the kernel shares the
    # CPU between sessions (autogroups) first, so every server must be in the same
    # position against `hey` and the machine's other jobs.
    process = subprocess.Popen([str(build_reference())], cwd=directory, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    stack.callback(stop_group, process, 15)
    url = f"https://127.0.0.1:{REFERENCE_PORT}"
    wait_healthy(url, tls["ca"], process, "/mutate")
    return url + "/mutate", process.pid


def pod_body(directory: Path) -> Path:
    body = directory / "pod.json"
    body.write_text(json.dumps(reviews.pod_create(f.pod("bench", node_name="gpu-hyb-1"))))
    return body


def against_reference(directory: Path) -> None:
    """Reference, `serve` defaults and allow-all, runs alternating; medians and ratios."""
    body = pod_body(directory)
    with ExitStack() as stack:
        reference, reference_pid = start_reference(stack, directory / "reference")
        url, _, served = stack.enter_context(running_server(directory / "real", "--state",
                                                            str(STATE)))
        base, base_pid = start_allow_all(stack, directory / "allow", "gevent", 1)
        targets = {"Go reference (net/http)": (reference, reference_pid),
                   "poolguard /mutate-pods (serve defaults)": (url + "/mutate-pods",
                                                               served.pid),
                   "allow-all Flask app, same gunicorn": (base + "/allow-all", base_pid)}
        for target, _pid in targets.values():
            hey(target, body, "-n", "400")  # warm up
        rounds = [{name: hey_cpu(target, body, pid) for name, (target, pid) in targets.items()}
                  for _ in range(ROUNDS)]
        results = {name: _median([r[name] for r in rounds]) for name in targets}
        for name, result in results.items():
            show(name, result)
        go, ours, allow = results.values()
        record("pods CREATE vs Go reference, requests/s", f"{ours.rps / go.rps:.2f}x",
               f">= 0.2x (poolguard {ours.rps:.0f}, Go {go.rps:.0f} req/s)",
               ours.rps / go.rps >= 0.2)
        record("pods CREATE vs Go reference, p99", f"{ours.p99 / go.p99:.1f}x",
               f"<= 2x (poolguard {ours.p99:.1f} ms, Go {go.p99:.1f} ms)",
               ours.p99 / go.p99 <= 2)
        print(f"  allow-all / Go reference: {allow.rps / go.rps:.2f}x the requests/s, "
              f"p99 {allow.p99 / go.p99:.1f}x")
        print(f"  poolguard / allow-all:    {ours.rps / allow.rps:.2f}x the requests/s")
        print(f"  server CPU per request: Go {go.cpu_us:.0f} µs, poolguard {ours.cpu_us:.0f} µs, "
              f"allow-all {allow.cpu_us:.0f} µs (Go uses both cores, a gevent worker one)")
        print("  load average while measuring: " + " ".join(
            f"{x:.1f}" for x in os.getloadavg()))


MODELS = [("gevent", 1, "(the default)"), ("gevent", 2, ""), ("gthread", 1, "x 8 threads"),
          ("gthread", 2, "x 8 threads")]


def worker_models(directory: Path) -> None:
    """Each worker model against the reference, one after the other (medians of 2)."""
    body = pod_body(directory)
    with ExitStack() as stack:
        reference, _ = start_reference(stack, directory / "reference")
        for worker_class, workers, note in MODELS:
            with running_server(directory / f"{worker_class}{workers}", "--state", str(STATE),
                                "--worker-class", worker_class,
                                workers=workers) as (url, _, served):
                hey(url + "/mutate-pods", body, "-n", "400")
                runs = [(hey(reference, body), hey_cpu(url + "/mutate-pods", body, served.pid))
                        for _ in range(2)]
            go, ours = _median([r[0] for r in runs]), _median([r[1] for r in runs])
            print(f"  {worker_class} x{workers} {note:<36} {ours.rps:6.0f} req/s "
                  f"({ours.rps / go.rps:.2f}x Go)  p50 {ours.p50:5.2f} ms  p99 {ours.p99:6.2f} ms "
                  f"({ours.p99 / go.p99:.1f}x Go)  CPU {ours.cpu_us:4.0f} µs/req  "
                  f"failed {ours.non_200 + ours.failed_transport}")


CAPACITY_RATES = (100, 200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 1800, 2200, 2600, 3000)
CAPACITY_SECONDS = 6.0
CAPACITY_P99_MS = 10.0


def paced(url: str, body: Path, rate: float, name: str = "poolguard",
          together: bool = False) -> tuple[heyrun.LoadResult, bool]:
    """One paced step of `rate` requests/s from 8 keep-alive clients, their ticks spread
    evenly (or, `together`, all at once as hey paces them); (result, p99 <= 10 ms)."""
    url = url.replace("https://localhost:", "https://127.0.0.1:")
    if together:
        result = heyrun.run(url, body, 8, CAPACITY_SECONDS, rate / 8)
    else:
        result = heyrun.staggered(url, body, 8, CAPACITY_SECONDS, rate)
    ok = result.p99 <= CAPACITY_P99_MS and result.rps >= 0.95 * rate and not (
        result.non_200 or result.failed_transport)
    print(f"  {name:<13} paced {rate:5.0f} req/s{' (ticks together)' if together else ''}: "
          f"achieved {result.rps:6.0f}  p50 {result.p50:5.2f} ms  p99 {result.p99:6.2f} ms"
          f"  {'ok' if ok else 'over'}  (load average {os.getloadavg()[0]:.1f})")
    return result, ok


def step_ok(url: str, body: Path, rate: float) -> bool:
    """A step that misses is run once more: a burst of the machine's other load (2 shared
    cores) must not end the search. Both runs are printed."""
    return paced(url, body, rate)[1] or paced(url, body, rate)[1]


def capacity(directory: Path) -> None:
    """The highest paced rate one replica serves with p99 <= 10 ms (8 keep-alive clients
    with evenly spread ticks, `serve` defaults): rising steps, then halving the gap between
    the last kept and the first missed rate twice. The Go reference is paced at the rate
    found and at the rate missed too, and both servers once more with hey's own pacing
    (8 requests at each tick): on a busy machine waiting for a core alone can take a p99
    past 10 ms, and synchronized bursts queue behind each other in one process."""
    body = pod_body(directory)
    carried, missed = 0.0, None
    with ExitStack() as stack:
        reference, _ = start_reference(stack, directory / "reference")
        url, _, _ = stack.enter_context(running_server(directory / "capacity", "--state",
                                                       str(STATE), workers=1))
        url += "/mutate-pods"
        hey(url, body, "-n", "400")
        for rate in CAPACITY_RATES:
            if not step_ok(url, body, rate):
                missed = rate
                break
            carried = rate
        for _ in range(2 if missed and carried else 0):
            middle = round((carried + missed) / 2 / 10) * 10
            if middle in (carried, missed):
                break
            if step_ok(url, body, middle):
                carried = middle
            else:
                missed = middle
        context = []
        for rate in (r for r in (carried, missed) if r):
            go = paced(reference, body, rate, "Go reference")[0]
            context.append(f"Go reference at {rate:.0f}: p99 {go.p99:.1f} ms")
        if carried:
            ours = paced(url, body, carried, together=True)[0]
            go = paced(reference, body, carried, "Go reference", together=True)[0]
            context.append(f"hey's own pacing (8 at a tick) at {carried:.0f}: poolguard p99 "
                           f"{ours.p99:.1f} ms, Go {go.p99:.1f} ms")
    value = f"{carried:.0f} reviews/s" + (f" (missed at {missed:.0f})" if missed else
                                          " (the highest rate tried)")
    print("  beside it: " + "; ".join(context))
    record("one replica (serve defaults), pod reviews/s at p99 <= 10 ms", value,
           "paced, 8 keep-alive clients, spread ticks, 6 s steps; large clusters create "
           "a few hundred pods/s (informative)")


def session_cpu_ms(session: int) -> float:
    """CPU time (user + system) used so far by every process of a session (the server's
    gunicorn master and workers): time it computed, not time it waited for a core."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[3]) == session:  # field 6, the session id, after "pid (comm)"
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total * 1000 / os.sysconf("SC_CLK_TCK")


def main() -> None:
    if shutil.which("hey") is None:
        sys.exit("hey is not installed: `apt-get install hey` (make bench does this)")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        print("server: pods CREATE reviews, 8 concurrent keep-alive HTTPS clients, medians of "
              f"{ROUNDS} alternating {DURATION} runs, same body for all")
        (directory / "ref").mkdir()
        against_reference(directory / "ref")
        print("worker models (each against the reference right before it):")
        (directory / "models").mkdir()
        worker_models(directory / "models")
        print("capacity of one replica (serve defaults), paced load from 8 clients:")
        (directory / "capacity").mkdir()
        capacity(directory)


if __name__ == "__main__":
    main()
