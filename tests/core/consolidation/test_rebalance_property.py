"""The rebalance plan on random GPU clusters, judged by what the generator knows.

On `overflow_clusters` (services overflowing from the inference pool into the hybrid
one, training pods, low-priority services that prefer the hybrid pool, unsettled
services, tainted inference nodes, CPU that can bound the room, room appearing as a
service shrinks or nodes are added):

- every move is a pod of a settled service whose home is the inference pool, running in
  the hybrid pool, going to the inference pool;
- every hybrid node a move touches ends with no GPU pod, and those are the freed nodes;
- the moved pods fit in the inference pool's room together (an exhaustive placement);
- the freed nodes are as many as any set of hybrid nodes whose GPU pods may all move and
  fit (a brute force over every set of hybrid nodes).
"""

from __future__ import annotations

import random
from functools import cache
from itertools import combinations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.overflow_clusters import (
    HIGH_CLASS,
    OverflowCluster,
    PodInfo,
    random_overflow_cluster,
)
from webhook.core.consolidation.rebalance.rebalance_plan import plan_rebalance
from webhook.core.policy.policy import parse_policy
from webhook.core.view.snapshot import Snapshot

POLICY = parse_policy({
    "pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
              {"name": "hybrid", "deletionCost": -100, "consolidate": "nodes"}],
    "rebalance": {"enabled": True, "priorityClassPools": {HIGH_CLASS: "inference"}}})


def may_move(info: PodInfo) -> bool:
    """The generator's own answer: a settled high-priority service's pod in the hybrid pool."""
    service = info.service
    return (service is not None and service.home == "inference" and not service.unsettled
            and info.node.startswith("hyb-"))


def fits_exhaustively(cluster: OverflowCluster, pods: list[PodInfo]) -> bool:
    """Can `pods` all be placed on the inference nodes that admit them, together?"""
    free = cluster.free()
    names = sorted(free)
    order = sorted(pods, key=lambda p: (-p.gpus, -p.cpu))

    @cache
    def place(index: int, left: tuple[tuple[int, int], ...]) -> bool:
        if index == len(order):
            return True
        pod = order[index]
        tried = set()
        for position, name in enumerate(names):
            gpus, cpu = left[position]
            key = (gpus, cpu, name in cluster.tainted)
            if key in tried or gpus < pod.gpus or cpu < pod.cpu:
                continue
            if name in cluster.tainted and not pod.service.tolerates:
                continue
            tried.add(key)
            after = list(left)
            after[position] = (gpus - pod.gpus, cpu - pod.cpu)
            if place(index + 1, tuple(after)):
                return True
        return False

    return place(0, tuple(free[name] for name in names))


def gpu_pods_on(cluster: OverflowCluster, node: str) -> list[PodInfo]:
    return [info for info in cluster.pods.values() if info.node == node and info.gpus]


def best_freeable(cluster: OverflowCluster) -> int:
    """The most hybrid nodes that can be emptied at once (brute force)."""
    movable = [n for n in cluster.hybrid
               if gpu_pods_on(cluster, n) and all(map(may_move, gpu_pods_on(cluster, n)))]
    for size in range(len(movable), 0, -1):
        for nodes in combinations(movable, size):
            if fits_exhaustively(cluster, [p for n in nodes for p in gpu_pods_on(cluster, n)]):
                return size
    return 0


def check_plan(cluster: OverflowCluster) -> tuple[int, int]:
    """Assert the properties of the module docstring; (freed, best)."""
    document = plan_rebalance(Snapshot(cluster.objects), POLICY).as_json()
    moved = {(m["namespace"], m["name"]) for m in document["moves"]}
    for move in document["moves"]:
        info = cluster.pods[(move["namespace"], move["name"])]
        assert may_move(info), move
        assert (move["pool"], move["toPool"], move["node"]) == ("hybrid", "inference", info.node)
        assert move["gpus"] == info.gpus
        assert move["workload"] == f"deployment/ml/{info.service.name}"
    touched = {m["node"] for m in document["moves"]}
    for node in touched:
        on_node = [ref for ref, info in cluster.pods.items() if info.node == node and info.gpus]
        assert set(on_node) <= moved, f"{node} keeps a GPU pod"
    assert {n["node"] for n in document["freedNodes"]} == touched
    assert all(n["pool"] == "hybrid" and n["gpus"] == 8 for n in document["freedNodes"])
    assert fits_exhaustively(cluster, [cluster.pods[ref] for ref in moved])
    skipped = {(s["namespace"], s["name"]) for s in document["skipped"]}
    hybrid_gpu_pods = {ref for ref, info in cluster.pods.items()
                       if info.node.startswith("hyb-") and info.gpus}
    assert skipped | moved == hybrid_gpu_pods and not skipped & moved
    best = best_freeable(cluster)
    assert len(document["freedNodes"]) == best
    return len(document["freedNodes"]), best


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_the_plan_frees_as_many_whole_hybrid_nodes_as_the_room_allows(seed: int) -> None:
    check_plan(random_overflow_cluster(random.Random(seed)))


def test_the_random_clusters_hold_every_case() -> None:
    """The generator reaches what the property is about: freed nodes, nodes kept by a
    training pod, by a low-priority pod and by an unsettled service, and no room."""
    seen = {"freed": 0, "training": 0, "low": 0, "unsettled": 0, "no room": 0}
    for seed in range(200):
        cluster = random_overflow_cluster(random.Random(seed))
        freed, best = check_plan(cluster)
        seen["freed"] += freed > 0
        for node in cluster.hybrid:
            pods = gpu_pods_on(cluster, node)
            seen["training"] += any(p.service is None for p in pods)
            seen["low"] += any(p.service and p.service.home == "hybrid" for p in pods)
            seen["unsettled"] += any(p.service and p.service.unsettled for p in pods)
        candidates = [n for n in cluster.hybrid if gpu_pods_on(cluster, n)
                      and all(map(may_move, gpu_pods_on(cluster, n)))]
        seen["no room"] += best < len(candidates)
    assert all(count >= 10 for count in seen.values()), seen
