"""poolguard at cluster scale, on the real local control plane of `make e2e`.

    make bench-scale          # BENCH_SCALE_PODS=30000 BENCH_SCALE_NODES=1000 by default

etcd, kube-apiserver, kube-controller-manager and kube-scheduler (tests/e2e/controlplane.py,
with the controllers' and the scheduler's API rate limits raised), fake Nodes in the e2e
pools (inference / hybrid / training, 3:3:2), the fake kubelet marking bound pods Running,
and poolguard installed from manifests/overlays/local-dev, `serve` and `reconcile` running
live with the shipped ServiceAccounts' tokens (tests/e2e/harness.py). Then:

1. burst: Deployments adding up to BENCH_SCALE_PODS pods are created at once; the real
   ReplicaSet controller creates the pods (poolguard's pods CREATE webhook) and the real
   scheduler binds them (its pods/binding webhook). Printed: the rates the API server
   achieved, the webhook's own latency histogram and the API server's view of it, the
   admissions that failed open;
2. `serve` restarted against the loaded cluster: time to /readyz, resident memory;
3. `reconcile` started: time to its first full pass, resident memory, pods it had to fix;
4. scale checks of the BENCH_SCALE_BIG-pod (5,000) Deployment, server-side dry runs
   through the API server (`kubectl scale` and the scale subresource PATCH).

Bounded: BENCH_SCALE_TIMEOUT seconds (default 2,400) for everything; the burst stops
waiting early enough for steps 2-4 to run on whatever was loaded. Everything started is
stopped at the end, on failure too (process groups; the children also die with this
process). Each figure goes to bench/results.py's table.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.controlplane import DEFAULT_BIN, ControlPlane, wait_for
from tests.e2e.harness import (
    FAKE_KUBELET_RBAC,
    PY,
    Environment,
    fake_node,
)
from tests.e2e.workloads import deployment, pod_template

from .results import record
from .scale_plan import (
    BIG_NAME,
    BIG_NAMESPACE,
    Settings,
    SettingsError,
    Workload,
    bucket_range,
    count_of,
    counter_sum,
    delta,
    histograms,
    load_range,
    node_pools,
    percentile_ms,
    quantile,
    workloads,
)

ROOT = Path(__file__).resolve().parent.parent

CLIENT_QPS, CLIENT_BURST = 1_000, 2_000  # controller-manager and scheduler
KUBELET_WORKERS = 64  # its status PATCHes wait seconds on the loaded API server
RESERVE = 420.0  # seconds kept for the steps after the burst
SAMPLE_EVERY = 5.0
WEBHOOK_HISTOGRAM = "poolguard_admission_duration_seconds"
APISERVER_WEBHOOK_HISTOGRAM = "apiserver_admission_webhook_admission_duration_seconds"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# --- processes -----------------------------------------------------------------------------


def group_memory(pgid: int) -> list[tuple[int, int, int]]:
    """(pid, resident KiB, peak resident KiB) of every process in group `pgid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # fields after the command: state ppid pgrp ...
                continue
            status = (stat.parent / "status").read_text().splitlines()
        except (OSError, IndexError, ValueError):
            continue
        values = {line.split(":")[0]: line.split()[1] for line in status
                  if line.startswith(("VmRSS", "VmHWM"))}
        found.append((int(stat.parent.name), int(values.get("VmRSS", 0)),
                      int(values.get("VmHWM", 0))))
    return sorted(found)


def memory_text(pgid: int) -> tuple[str, int]:
    """A printable resident memory of each process of a group, and the MiB resident in its
    processes other than the leader (serve's gunicorn workers, which hold the cache; the
    leader itself for a single process)."""
    rows = group_memory(pgid)
    parts = [f"{'leader' if pid == pgid else 'worker'} {rss / 1024:.0f} MiB "
             f"(peak {peak / 1024:.0f})" for pid, rss, peak in rows]
    workers = [rss for pid, rss, _ in rows if pid != pgid] or [rss for _, rss, _ in rows]
    return ", ".join(parts), sum(workers) // 1024


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of the live processes of group `pgid` and of the children
    they waited for."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:  # after the command: state ppid pgrp ... utime at 11
            total += sum(int(v) for v in fields[11:15])
    return total / ticks


# --- the run -------------------------------------------------------------------------------


@dataclass
class Bench:
    settings: Settings
    env: Environment
    deadline: float
    started: float = field(default_factory=time.monotonic)
    baseline_rss_mib: int = 0

    @property
    def plane(self) -> ControlPlane:
        return self.env.plane

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def apiserver_metrics(self) -> str:
        """The API server's /metrics (megabytes; slow to render on a loaded server)."""
        context = ssl.create_default_context(cafile=str(self.plane.pki / "ca.crt"))
        context.load_cert_chain(self.plane.pki / "client-admin.crt",
                                self.plane.pki / "client-admin.key")
        with urllib.request.urlopen(self.plane.server + "/metrics", context=context,
                                    timeout=120) as answer:
            return answer.read().decode()

    def webhook_metrics(self) -> str:
        code, text = self.env.webhook_get("/metrics")
        if code != 200:
            raise RuntimeError(f"webhook /metrics answered {code}: {text[:200]}")
        return text

    # -- setup --

    def bootstrap(self) -> None:
        """Fake Nodes in the e2e pools, the fake kubelet, poolguard installed."""
        env = self.env
        env.kubectl("apply", "-f", "-", stdin=FAKE_KUBELET_RBAC, check=True)
        pools = node_pools(self.settings.nodes)
        names = [(f"{pool}-{i}", pool) for pool, count in pools.items()
                 for i in range(1, count + 1)]
        began = time.monotonic()

        def create(item: tuple[int, tuple[str, str]]) -> None:
            index, (name, pool) = item
            node = fake_node(name, pool, index)
            # fake_node numbers addresses for a handful of nodes; a thousand need two octets
            node.status.addresses[0].address = f"10.1.{index // 250}.{index % 250 + 1}"
            env.core.create_node(node)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, enumerate(names, start=1)))
        log(f"{len(names)} nodes ({pools}) in {time.monotonic() - began:.1f} s")
        self.plane.spawn("fake-kubelet", [PY, "-m", "tests.e2e.fake_kubelet", "--kubeconfig",
                                          str(self.plane.kubeconfig("fake-kubelet")),
                                          "--workers", str(KUBELET_WORKERS)])
        wait_for("the serviceaccount controller to make default/default",
                 lambda: env.core.read_namespaced_service_account("default", "default"),
                 timeout=120)
        env.install_poolguard()
        # As the manifests run it: no access log (install_poolguard's serve has one).
        env.stop_serve()
        env.start_serve(access_log=False)
        time.sleep(2)
        self.baseline_rss_mib = memory_text(env.serve.popen.pid)[1]
        log(f"poolguard installed; serve on an empty cluster: "
            f"{memory_text(env.serve.popen.pid)[0]}")

    # -- 1. the burst --

    def burst(self, planned: list[Workload]) -> None:
        env, total = self.env, sum(w.replicas for w in planned)
        for namespace in sorted({w.namespace for w in planned}):
            env.new_namespace(namespace)
        hook_before = self.webhook_metrics()
        api_before = self.apiserver_metrics()
        counts_before = apiserver_counts(api_before)
        cpu_before = self.cpu_seconds()
        log(f"creating {len(planned)} Deployments, {total} pods (load average "
            f"{load_average()})")
        began = time.monotonic()
        for work in planned:
            template = pod_template(work.name, pools=work.pools)
            env.apps.create_namespaced_deployment(
                work.namespace, deployment(work.name, work.replicas, template,
                                           max_surge="25%", max_unavailable="25%"))
        samples: list[tuple[float, dict[str, float]]] = [
            (0.0, {**dict.fromkeys(counts_before, 0.0), "ready": 0.0, "active": 0.0})]
        loads = [load_average()]
        stop_at = self.deadline - RESERVE
        ready = 0
        while ready < total and time.monotonic() < stop_at:
            time.sleep(SAMPLE_EVERY)
            self.plane.check_alive()
            # ReplicaSet statuses are cheap to read; the API server's /metrics page is not
            # (megabytes, seconds to render under this load): that only every 30 s.
            sets = env.apps.list_replica_set_for_all_namespaces().items
            ready = sum(rs.status.ready_replicas or 0 for rs in sets)
            counts = {"ready": float(ready),
                      "active": float(sum(rs.status.replicas or 0 for rs in sets))}
            if len(samples) % 6 == 0:
                api_now = apiserver_counts(self.apiserver_metrics())
                counts.update({k: v - counts_before.get(k, 0.0) for k, v in api_now.items()})
                loads.append(load_average())
                log(f"  {time.monotonic() - began:4.0f} s: {counts['created']:.0f} created, "
                    f"{counts['bound']:.0f} bound, {counts['started']:.0f} started, {ready} "
                    f"ready (load {loads[-1]})")
            samples.append((time.monotonic() - began, counts))
        elapsed = time.monotonic() - began
        cpu_after = self.cpu_seconds()
        loads.append(load_average())
        hook_after, api_after = self.webhook_metrics(), self.apiserver_metrics()
        final = apiserver_counts(api_after)
        samples.append((elapsed, {**{k: v - counts_before.get(k, 0.0) for k, v in final.items()},
                                  "ready": float(ready)}))
        self.report_burst(total, ready, elapsed, samples, loads)
        self.report_cpu(cpu_before, cpu_after, elapsed, final["created"] - counts_before[
            "created"] + final["bound"] - counts_before["bound"])
        self.report_admission(hook_before, hook_after, api_before, api_after,
                              ("/mutate-pods", "/mutate-bindings"))
        self.report_binding_reads(hook_before, hook_after, api_before, api_after)
        text, grown = memory_text(env.serve.popen.pid)
        record("scale: serve memory after the burst (cache filled event by event)",
               f"{text}; workers +{grown - self.baseline_rss_mib} MiB over the empty "
               f"cluster's {self.baseline_rss_mib} MiB", "informative")

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far by each process group this run started."""
        return {name: group_cpu_seconds(process.popen.pid)
                for name, process in self.plane.processes.items()}

    def report_cpu(self, before: dict[str, float], after: dict[str, float], elapsed: float,
                   reviews: float) -> None:
        used = {name: after[name] - before.get(name, 0.0) for name in after}
        parts = ", ".join(f"{name} {seconds:.0f} s ({seconds / elapsed:.0%})"
                          for name, seconds in sorted(used.items(), key=lambda kv: -kv[1]))
        serve = used.get("poolguard-serve", 0.0)
        record("scale: CPU during the burst (share of one core)",
               f"{parts}; machine load average {load_average()} on {os.cpu_count()} cores",
               "informative")
        record("scale: serve CPU per admission review during the burst",
               f"{serve * 1e6 / max(reviews, 1):.0f} us ({reviews:,.0f} pod and binding "
               f"reviews; includes its watch of every pod event)", "informative")

    def report_burst(self, total: int, ready: int, elapsed: float,
                     samples: list[tuple[float, dict[str, float]]], loads: list[str]) -> None:
        nodes = self.settings.nodes
        outcome = "all" if ready >= total else f"ONLY {ready:,} of"
        record("scale: cluster loaded",
               f"{outcome} {total:,} pods Ready on {nodes:,} nodes in {elapsed:.0f} s "
               f"(1-minute load average {load_range(loads)} while it ran)",
               f"all {total:,} within BENCH_SCALE_TIMEOUT", ready >= total)
        for key, what in (("active", "pods created (ReplicaSet statuses, every 5 s)"),
                          ("created", "pods created (POST pods 201, ReplicaSet controller)"),
                          ("bound", "pods bound (POST pods/binding 201, scheduler)"),
                          ("started", "pods started (PATCH pods/status, fake kubelet)"),
                          ("ready", "pods Ready (ReplicaSet statuses, every 5 s)")):
            series = [(t, c) for t, c in samples if key in c]
            mean, peak = rates(series, key)
            record(f"scale: {what}", f"{series[-1][1][key]:,.0f} at {mean:.0f}/s mean, "
                   f"{peak:.0f}/s peak between two samples", "informative")

    def report_admission(self, hook_before: str, hook_after: str, api_before: str,
                         api_after: str, endpoints: tuple[str, ...]) -> None:
        """The webhook's own histogram and the API server's, over one phase."""
        own_before = histograms(hook_before, WEBHOOK_HISTOGRAM, "endpoint")
        own_after = histograms(hook_after, WEBHOOK_HISTOGRAM, "endpoint")
        seen_before = histograms(api_before, APISERVER_WEBHOOK_HISTOGRAM, "name")
        seen_after = histograms(api_after, APISERVER_WEBHOOK_HISTOGRAM, "name")
        webhook_of = {"/mutate-pods": "pods.poolguard.dev",
                      "/mutate-bindings": "bindings.poolguard.dev",
                      "/validate-scale": "scale.poolguard.dev"}
        for endpoint in endpoints:
            own = delta(own_before.get(endpoint), own_after.get(endpoint, []))
            name = webhook_of[endpoint]
            seen = delta(seen_before.get(name), seen_after.get(name, []))
            bound = 0.05 if endpoint == "/validate-scale" else None
            p99 = quantile(own, 0.99)
            record(f"scale: {endpoint} latency, the webhook's histogram",
                   f"{count_of(own):,} reviews, p50 {ms(quantile(own, 0.5))}, p99 {ms(p99)}",
                   "p99 <= 50 ms" if bound else "informative",
                   None if bound is None or p99 is None else p99 <= bound)
            record(f"scale: {endpoint} latency seen by the API server",
                   f"{count_of(seen):,} calls, p50 in {bucket_range(seen, 0.5)}, p99 in "
                   f"{bucket_range(seen, 0.99)} (its coarse buckets)", "informative")
        failed_open = (counter_sum(api_after, "apiserver_admission_webhook_fail_open_count")
                       - counter_sum(api_before, "apiserver_admission_webhook_fail_open_count"))
        record(f"scale: admissions failed open ({', '.join(endpoints)})",
               f"{failed_open:.0f}", "0 (a timeout or error lets the request through "
               "unchecked)", failed_open == 0)

    @staticmethod
    def report_binding_reads(hook_before: str, hook_after: str, api_before: str,
                             api_after: str) -> None:
        """Bindings whose pod the watch had not delivered yet: read from the API server
        (namespaced pod LISTs: no other component here makes them), and those left to
        the reconciler (outcome pod-unknown)."""
        def grown(before: str, after: str, metric: str, where: dict[str, str]) -> float:
            return counter_sum(after, metric, where) - counter_sum(before, metric, where)

        reads = grown(api_before, api_after, "apiserver_request_total",
                      {"verb": "LIST", "resource": "pods", "scope": "namespace"})
        unknown = grown(hook_before, hook_after, "poolguard_admission_decisions_total",
                        {"endpoint": "/mutate-bindings", "outcome": "pod-unknown"})
        record("scale: bindings whose pod was read from the API server (not yet cached)",
               f"{reads:,.0f} reads; {unknown:,.0f} bindings left to the reconciler "
               "(pod unknown)", "informative")

    # -- 2. serve restarted on the loaded cluster --

    def restart_serve(self) -> None:
        env = self.env
        env.stop_serve()
        pods = self.settings.pods
        began = time.monotonic()
        env.start_serve(ready_timeout=max(min(600.0, self.left() - 240), 60.0),
                        access_log=False)
        synced = time.monotonic() - began
        _, details = env.webhook_get("/readyz")
        counts = {name: r.get("objects", r.get("count")) for name, r in
                  (json.loads(details).get("resources", {}).get("resources") or {}).items()}
        record("scale: serve started on the loaded cluster until /readyz",
               f"{synced:.1f} s ({counts}; load average {load_average()})", "informative")
        time.sleep(3)
        text, largest = memory_text(env.serve.popen.pid)
        grown = largest - self.baseline_rss_mib
        per_10k = grown * 10_000 / max(pods, 1)
        record("scale: serve memory after a fresh sync",
               f"{text}; workers +{grown} MiB over the empty cluster = {per_10k:.0f} MiB "
               f"per 10,000 pods", "<= 60 MiB per 10,000 pods per replica (judged "
               "from 10,000 pods up)", per_10k <= 60 if pods >= 10_000 else None)

    # -- 3. the reconciler --

    def reconciler(self) -> None:
        env = self.env
        began = time.monotonic()
        env.start_reconciler(ready_timeout=max(min(300.0, self.left() - 180), 30.0))
        leading = time.monotonic() - began
        log_file = self.plane.run_dir / "logs" / "poolguard-reconcile.log"

        def first_pass() -> str | None:
            for line in log_file.read_text(errors="replace").splitlines():
                if "resync:" in line:
                    return line.split("resync:", 1)[1].strip()
            return None

        summary = wait_for("the reconciler's first full pass", first_pass,
                           timeout=max(min(300.0, self.left() - 180), 30.0), interval=0.5)
        passed = time.monotonic() - began
        assert env.reconciler is not None
        text, _ = memory_text(env.reconciler.popen.pid)
        record("scale: reconcile started until it led and had evaluated every pod",
               f"Lease in {leading:.1f} s, every pod evaluated at {passed:.1f} s: {summary} "
               f"(queued pods are patched next, at its --qps; load average "
               f"{load_average()})", "informative")
        record("scale: reconcile memory", text, "informative")

    # -- 4. scale checks --

    def scale_checks(self, rounds: int = 20) -> None:
        env = self.env
        big = self.settings.big
        target = big - max(big // 10, 1)
        hook_before, api_before = self.webhook_metrics(), self.apiserver_metrics()
        kubectl_times, outputs = [], []
        for _ in range(min(rounds, 10)):
            began = time.monotonic()
            done = env.kubectl("-n", BIG_NAMESPACE, "scale", f"deployment/{BIG_NAME}",
                               f"--replicas={target}", "--dry-run=server")
            kubectl_times.append(time.monotonic() - began)
            outputs.append((done.code, (done.stdout + done.stderr).strip()))
        patch_times, answers = [], []
        for _ in range(rounds):
            began = time.monotonic()
            answers.append(scale_patch(env, target))
            patch_times.append(time.monotonic() - began)
        hook_after, api_after = self.webhook_metrics(), self.apiserver_metrics()
        code, output = outputs[0]
        record(f"scale: `kubectl scale --dry-run=server` {big:,} -> {target:,} pods",
               f"p50 {percentile_ms(kubectl_times, 0.5):.0f} ms, max "
               f"{max(kubectl_times) * 1000:.0f} ms over {len(kubectl_times)} (a kubectl "
               f"process each; exit {code}: {output[:160]!r})", "informative")
        record(f"scale: scale subresource PATCH dryRun=All {big:,} -> {target:,} pods",
               f"p50 {percentile_ms(patch_times, 0.5):.0f} ms, p99 "
               f"{percentile_ms(patch_times, 0.99):.0f} ms over {rounds} "
               f"({sorted(set(answers))}; load average {load_average()})", "informative")
        self.report_admission(hook_before, hook_after, api_before, api_after,
                              ("/validate-scale",))


def scale_patch(env: Environment, replicas: int) -> str:
    """A dry-run merge PATCH of the big Deployment's scale; 'allowed' or the HTTP status."""
    from kubernetes.client.exceptions import ApiException

    try:
        env.apps.patch_namespaced_deployment_scale(
            BIG_NAME, BIG_NAMESPACE, {"spec": {"replicas": replicas}}, dry_run="All")
        return "allowed"
    except ApiException as err:
        return f"HTTP {err.status}"


def apiserver_counts(text: str) -> dict[str, float]:
    """Requests the burst is made of, from the API server's apiserver_request_total."""
    metric = "apiserver_request_total"
    return {
        "created": counter_sum(text, metric, {"verb": "POST", "resource": "pods",
                                              "subresource": "", "code": "201"}),
        "bound": counter_sum(text, metric, {"verb": "POST", "resource": "pods",
                                            "subresource": "binding", "code": "201"}),
        "started": counter_sum(text, metric, {"verb": "PATCH", "resource": "pods",
                                              "subresource": "status", "code": "200"}),
    }


def rates(samples: list[tuple[float, dict[str, float]]], key: str) -> tuple[float, float]:
    """(mean rate from the first to the last change, highest rate between two samples)."""
    moving = [(t, s[key]) for t, s in samples]
    changed = [i for i in range(1, len(moving)) if moving[i][1] > moving[i - 1][1]]
    if not changed:
        return 0.0, 0.0
    first, last = changed[0] - 1, changed[-1]
    span = moving[last][0] - moving[first][0]
    mean = (moving[last][1] - moving[first][1]) / span if span else 0.0
    peak = max((moving[i][1] - moving[i - 1][1]) / (moving[i][0] - moving[i - 1][0])
               for i in changed)
    return mean, peak


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.1f} ms"


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt("signal")  # unwinds into main's finally: everything stops


def run(settings: Settings) -> int:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = Path.home() / ".cache" / "poolguard-e2e" / "runs" / f"bench-scale-{stamp}"
    run_dir.mkdir(parents=True)
    plane = ControlPlane(run_dir, bin_dir=Path(os.environ.get("E2E_BIN", DEFAULT_BIN)),
                         client_qps=CLIENT_QPS, client_burst=CLIENT_BURST)
    began = time.monotonic()
    # A hard stop a little after the deadline, whatever step is blocked.
    signal.signal(signal.SIGALRM, _interrupt)
    signal.alarm(int(settings.timeout) + 60)
    log(f"bench-scale: {settings.pods:,} pods on {settings.nodes:,} nodes, a "
        f"{settings.big:,}-pod Deployment checked, at most {settings.timeout:.0f} s; run "
        f"directory {run_dir}; load average {load_average()}")
    try:
        plane.start()
        log(f"control plane up in {time.monotonic() - began:.0f} s")
        bench = Bench(settings, Environment(plane), deadline=began + settings.timeout)
        bench.bootstrap()
        bench.burst(workloads(settings))
        # Each step on its own: one that fails is reported and the next still runs.
        steps: list[tuple[str, Callable[[], None]]] = [
            ("serve restart", bench.restart_serve), ("scale checks", bench.scale_checks),
            ("reconciler", bench.reconciler)]
        failed = 0
        for name, step in steps:
            log(f"{name} (load average {load_average()}, {bench.left():.0f} s left)")
            try:
                step()
            except Exception as err:  # reported as a figure; the next step still runs
                failed += 1
                record(f"scale: {name}", f"FAILED: {type(err).__name__}: {err}"[:300],
                       "completes", False)
        return 1 if failed else 0
    finally:
        signal.alarm(0)
        log("stopping the control plane and poolguard")
        plane.stop(timeout=10)
        shutil.rmtree(run_dir / "etcd", ignore_errors=True)
        log(f"done in {time.monotonic() - began:.0f} s; logs kept in {run_dir / 'logs'}")


def main() -> int:
    try:
        settings = Settings.from_env(os.environ)
    except SettingsError as err:
        print(f"bench-scale: {err}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    return run(settings)


if __name__ == "__main__":
    sys.exit(main())
