"""Core benchmark: predict and judge a ReplicaSet scale-down at 100, 1,000 and 10,000 pods.

Prints the median of several runs per size and the growth against n log n. Times are
core time only (objects are built beforehand), measured with time.perf_counter.
"""

from __future__ import annotations

import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

from tests.support import factories as f
from webhook.core.assessment import assess_scale
from webhook.core.cluster import Snapshot
from webhook.core.kube import format_time_ns, parse_time_ns
from webhook.core.policy import default_policy

NOW = parse_time_ns("2026-11-22T12:00:00Z")
POOLS = ["inference", "hybrid", "training", None]
COSTS = {"inference": "1000", "hybrid": "-100"}


def cluster(size: int, seed: int = 7) -> tuple[Snapshot, dict]:
    """A Deployment-owned ReplicaSet of `size` pods over size/8 nodes in four pools."""
    objects = cluster_objects(size, seed)
    return Snapshot(objects), objects[1]


def cluster_objects(size: int, seed: int = 7) -> list[dict]:
    """[Deployment, ReplicaSet, nodes..., pods...] for `cluster`."""
    rng = random.Random(seed)
    nodes = [f.node(f"node-{i}", POOLS[i % 4]) for i in range(max(size // 8, 4))]
    deploy = f.deployment("serve", replicas=size)
    rs = f.replicaset("serve-abc", owner=deploy, replicas=size, pod_hash="abc")
    pods = []
    for i in range(size):
        node = rng.choice(nodes)
        pool = node["metadata"]["labels"].get("node.usage")
        cost = COSTS.get(pool) if rng.random() < 0.9 else None
        ready = format_time_ns(NOW - rng.randrange(60, 7 * 86400) * 10**9)
        pods.append(f.pod(f"serve-abc-{i:05d}", node_name=node["metadata"]["name"], owner=rs,
                          cost=cost, ready_time=ready, created=ready,
                          restarts=rng.choice([0, 0, 0, 1, 2])))
    return [deploy, rs, *nodes, *pods]


def measure(size: int, repeats: int, keep: float = 0.5) -> float:
    view, rs = cluster(size)
    policy = default_policy()
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        assess_scale(view, policy, rs, int(size * keep), NOW)
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def main() -> None:
    print("core: predict + judge a ReplicaSet scale-down to half its size (median)")
    results = {}
    for size, repeats in ((100, 30), (1_000, 10), (10_000, 5)):
        results[size] = measure(size, repeats)
        print(f"  {size:>6} pods: {results[size] * 1000:8.2f} ms")
    base = results[100] / (100 * math.log2(100))
    for size in (1_000, 10_000):
        ratio = results[size] / results[100]
        nlogn = (size * math.log2(size)) / (100 * math.log2(100))
        print(f"  growth 100 -> {size}: x{ratio:.1f} (n log n predicts x{nlogn:.1f}; "
              f"per n log n unit {results[size] / (size * math.log2(size)) / base:.2f} of 100's)")
    tenth = measure(10_000, 5, keep=0.9) * 1000
    print(f"  10,000 pods scaled down by 10% (two controller syncs): {tenth:.1f} ms")
    for label, value in (("halving", results[10_000] * 1000), ("10% scale-down", tenth)):
        verdict = "met" if value <= 100 else "NOT met"
        print(f"  goal 10,000 pods <= 100 ms, {label}: {verdict} ({value:.1f} ms)")


if __name__ == "__main__":
    main()
