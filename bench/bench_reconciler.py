"""Reconciler figures against the fake API server (tests/support/kubeapi/).

    .venv/bin/python -m bench.bench_reconciler [--pods 1000] [--skip-default-rate]

Prints, for N governed pods spread over inference and hybrid nodes:
- a first `--once` pass over N stale pods (no cost yet): wall time and API writes,
  with a high rate limit and with the default one (--qps 5 --burst 10);
- a second `--once` pass over the same, now unchanged, pods: API writes (goal: 0);
- the long-running service on the unchanged cluster: pod writes during its initial
  pass and three periodic resyncs (goal: 0);
- node ranks (the hybrid pool consolidates): the service at the default budget
  (--qps 5 --burst 10) while N GPU pods are bound at once to 8-GPU hybrid nodes of
  several workloads: seconds until every pod carries the cost the preview names, and
  pod writes; then pods deleted and created one at a time on the converged cluster:
  pod writes per pod event.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory

from tests.support import factories as f
from tests.support.gpu_clusters import gpu_node, gpu_pod
from tests.support.kubeapi.helpers import wait_until
from tests.support.kubeapi.server import FakeKubeAPI
from webhook.cluster.kubeclient import api_client_from
from webhook.cluster.live import LiveCluster
from webhook.core.policy.policy import default_policy
from webhook.core.view.resource import NAMESPACES, NODES, PODS
from webhook.core.view.snapshot import Snapshot
from webhook.reconciler.options import Options
from webhook.reconciler.passes import run_once
from webhook.reconciler.preview import preview
from webhook.reconciler.service import Service

from .results import record

ROOT = Path(__file__).resolve().parent.parent

HIGH = Options(qps=100_000, burst=100_000, identity="bench")
DEFAULT = Options(identity="bench")


def seed(api: FakeKubeAPI, pods: int) -> None:
    """N pods over 10 nodes (5 inference, 5 hybrid), none with a cost."""
    api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    nodes = [f.node(f"inf-{i}", "inference") for i in range(5)]
    nodes += [f.node(f"hyb-{i}", "hybrid") for i in range(5)]
    api.put(*nodes)
    api.put(*(f.pod(f"serve-{i:05d}", node_name=nodes[i % 10]["metadata"]["name"])
              for i in range(pods)))


def counts(api: FakeKubeAPI) -> dict[str, int]:
    return {"pod PATCH": api.write_count("PATCH", "/pods/"),
            "Event POST": api.write_count("POST", "/events"),
            "Lease writes": api.write_count(path_contains="/leases")}


def timed_pass(api: FakeKubeAPI, kubeconfig: str, options: Options) -> tuple[float, dict, str]:
    """One run_once pass; (seconds, writes it made by kind, summary line)."""
    client = api_client_from(kubeconfig)
    before = counts(api)
    began = time.perf_counter()
    summary = run_once(client, default_policy(), options, out=lambda line: None)
    seconds = time.perf_counter() - began
    client.close()
    after = counts(api)
    return seconds, {k: after[k] - before[k] for k in after}, summary.line()


def service_steady_state(api: FakeKubeAPI, kubeconfig: str) -> tuple[int, float]:
    """Run the service on a converged cluster through three resyncs: (pod writes, s)."""
    client = api_client_from(kubeconfig)
    cluster = LiveCluster(client, (PODS, NODES, NAMESPACES))
    service = Service(client, default_policy(), replace(HIGH, resync_seconds=0.5),
                      cluster=cluster, out=lambda line: None)
    before = api.write_count("PATCH", "/pods/")
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    began = time.perf_counter()
    thread.start()
    wait_until(lambda: service.metrics.resyncs._value.get() >= 4, timeout=120,
               message="four passes")
    seconds = time.perf_counter() - began
    stop.set()
    thread.join(timeout=10)
    client.close()
    return api.write_count("PATCH", "/pods/") - before, seconds


def ranks_true(api: FakeKubeAPI) -> bool:
    """Does every governed scheduled pod carry the cost the reconciler wants for it?"""
    view = Snapshot([*api.objects("Namespace"), *api.objects("Node"), *api.objects("Pod")])
    return all(entry["deletionCost"] == entry["desiredCost"]
               for entry in preview(view, default_policy(), DEFAULT.exclude_namespaces)["pods"])


def gpu_pods(pods: int) -> tuple[list[dict], list[dict]]:
    """(hybrid 8-GPU nodes, `pods` one-GPU pods of 4 ReplicaSets packed onto them: two
    nodes in three hold one ReplicaSet's pods, the third mixes all four)."""
    nodes = [gpu_node(f"hyb-{i:03d}", "hybrid") for i in range((pods + 7) // 8 + 2)]
    sets = [f.replicaset(f"serve-{i}", replicas=pods // 4) for i in range(4)]
    placed = [gpu_pod(f"serve-{i:05d}", nodes[i // 8]["metadata"]["name"], 1,
                      sets[(i // 8) % 4 if (i // 8) % 3 else i % 4], i % 3600)
              for i in range(pods)]
    for pod in placed:
        pod["metadata"].pop("annotations", None)
    return nodes, sets + placed


def node_ranks(pods: int) -> None:
    """Convergence after `pods` bindings at once, and writes per pod event after it."""
    with TemporaryDirectory() as tmp, FakeKubeAPI(bookmark_interval=1.0) as api:
        kubeconfig = str(api.write_kubeconfig(Path(tmp) / "kubeconfig"))
        api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        nodes, objects = gpu_pods(pods)
        api.put(*nodes)
        client = api_client_from(kubeconfig)
        service = Service(client, default_policy(), replace(DEFAULT, events=False),
                          cluster=LiveCluster(client, (PODS, NODES, NAMESPACES)),
                          out=lambda line: None)
        stop = threading.Event()
        thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
        thread.start()
        wait_until(service.is_leader, timeout=60, message="the Lease")
        api.put(*objects)
        began = time.perf_counter()
        wait_until(lambda: ranks_true(api), timeout=3600, interval=1.0,
                   message="every rank true")
        converged = time.perf_counter() - began
        bound_writes = api.write_count("PATCH", "/pods/")
        events = writes_per_event(api, service, rounds=max(1, min(10, pods // 24)))
        stop.set()
        thread.join(timeout=10)
        client.close()
    print(f"\nnode ranks: {pods} GPU pods bound at once, default --qps {DEFAULT.qps:g} --burst "
          f"{DEFAULT.burst}\n  every rank true after {converged:.1f} s; pod PATCH "
          f"{bound_writes} ({bound_writes / pods:.2f} per pod)\n"
          f"  then {events[0]} pod events one at a time: pod PATCH {events[1]} "
          f"({events[1] / events[0]:.2f} per event)")
    record(f"reconciler, {pods:,} pods bound at once: seconds until every rank is true",
           f"{converged:.0f}", "informative")
    record("reconciler, node ranks: pod writes per pod event", f"{events[1] / events[0]:.2f}",
           "<= pods on the node (8)", events[1] / events[0] <= 8)


def writes_per_event(api: FakeKubeAPI, service: Service, rounds: int = 10) -> tuple[int, int]:
    """Delete then re-create one pod on each of `rounds` nodes, each once the ranks are
    true again: (pod events, pod writes they caused)."""
    before = api.write_count("PATCH", "/pods/")
    events = 0
    for index in range(rounds):
        name = f"serve-{(index * 3 + 1) * 8:05d}"  # on a node of one ReplicaSet
        pod = api.get("Pod", "ml", name)
        api.delete("Pod", "ml", name)
        wait_until(lambda: ranks_true(api), timeout=600, interval=0.5, message="re-ranked")
        pod["metadata"].pop("resourceVersion", None)
        pod["metadata"].pop("annotations", None)
        api.put(pod)
        wait_until(lambda: ranks_true(api), timeout=600, interval=0.5, message="re-ranked")
        events += 2
    return events, api.write_count("PATCH", "/pods/") - before


def report(title: str, seconds: float, writes: dict, summary: str, pods: int) -> None:
    rate = pods / seconds if seconds else float("inf")
    print(f"{title}\n  {summary}\n  wall time {seconds:.2f} s ({rate:,.0f} pods/s); "
          f"writes: " + ", ".join(f"{k} {v}" for k, v in writes.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--skip-default-rate", action="store_true",
                        help="skip the passes at the default 5 writes/s (they take pods/5 s "
                        "each)")
    args = parser.parse_args()
    with TemporaryDirectory() as tmp, FakeKubeAPI(bookmark_interval=1.0) as api:
        kubeconfig = str(api.write_kubeconfig(Path(tmp) / "kubeconfig"))
        seed(api, args.pods)
        print(f"{args.pods} governed pods on 10 nodes, fake API server at {api.url}\n")
        report(f"first pass, stale pods, --qps {HIGH.qps:g} --burst {HIGH.burst}",
               *timed_pass(api, kubeconfig, HIGH), args.pods)
        second = timed_pass(api, kubeconfig, HIGH)
        report("second pass, unchanged pods", *second, args.pods)
        writes, seconds = service_steady_state(api, kubeconfig)
        print(f"service on the unchanged cluster, initial pass + 3 resyncs ({seconds:.1f} s)\n"
              f"  pod PATCH {writes}")
        patches = second[1].get("pod PATCH", 0)
        record(f"reconciler, second pass over {args.pods:,} unchanged pods: pod writes",
               str(patches), "= 0", patches == 0)
        record("reconciler service, initial pass + 3 resyncs, unchanged: pod writes",
               str(writes), "= 0", writes == 0)
    if not args.skip_default_rate:
        with TemporaryDirectory() as tmp, FakeKubeAPI(bookmark_interval=1.0) as api:
            kubeconfig = str(api.write_kubeconfig(Path(tmp) / "kubeconfig"))
            seed(api, args.pods)
            report(f"\nfirst pass, stale pods, default --qps {DEFAULT.qps:g} --burst "
                   f"{DEFAULT.burst}", *timed_pass(api, kubeconfig, DEFAULT), args.pods)
        node_ranks(args.pods)
    return 0


if __name__ == "__main__":
    sys.exit(main())
