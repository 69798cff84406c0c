"""A LeaderWorkerSet's leader StatefulSet scaled by itself: each leader takes its workers.

`plan sts/NS/NAME` of the leader StatefulSet a LeaderWorkerSet owns (named like it,
`leader_worker_set`): the StatefulSet controller deletes the leaders past the new count,
and the garbage collector then deletes each one's worker StatefulSet, which the leader
pod owns (pod_controller.go, `constructWorkerStatefulSetApplyConfiguration`), and so
its workers. The LeaderWorkerSet controller writes the StatefulSet's replicas back on
its next reconcile: the scale is undone, but the groups are gone meanwhile. So the
victims are whole groups, leader first, as for the LeaderWorkerSet itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model.blocked import Blocked
from ..model.prediction import ScalePrediction
from ..model.ranked_pod import RankedPod, ranked_pod
from ..objects.kube import controller_ref, name_of, namespace_of
from ..view.cluster import ClusterView
from .leader_worker_set import group_position, set_pods


def with_group_workers(view: ClusterView, sts: Mapping[str, Any],
                       prediction: ScalePrediction) -> ScalePrediction:
    """`prediction` (of StatefulSet `sts`) with each leader's workers after it, when `sts`
    is a LeaderWorkerSet's leader StatefulSet; else `prediction` unchanged."""
    ref = controller_ref(sts)
    name, namespace = name_of(sts), namespace_of(sts)
    if ref is None or ref.get("kind") != "LeaderWorkerSet" or ref.get("name") != name:
        return prediction
    workers = _workers_by_group(view, namespace, name)

    def with_workers(leaders: list[RankedPod]) -> list[RankedPod]:
        pods = []
        for leader in leaders:
            pods.append(leader)
            pods.extend(workers.get(_group_of(leader, name), []))
        return pods

    for leader in prediction.victims:
        for worker in workers.get(_group_of(leader, name), []):
            prediction.reasons[worker.name] = (
                f"worker of leader {leader.name} (garbage-collected with its worker "
                f"StatefulSet {leader.name})")
    prediction.victims = with_workers(prediction.victims)
    prediction.survivors = with_workers(prediction.survivors)
    prediction.blocked = [Blocked(pod, blocked.wait) for blocked in prediction.blocked
                          for pod in with_workers([blocked.pod])]
    prediction.order = (prediction.victims + [b.pod for b in prediction.blocked]
                        + prediction.survivors)
    # A prefix of leaders and workers is no smaller scale's victims: predict each count.
    prediction.prefix_order, prediction.prefix_chain = None, None
    prediction.notes.append(
        f"each leader of LeaderWorkerSet {name} that goes takes its group's workers with it "
        f"(the garbage collector deletes its worker StatefulSet); LeaderWorkerSet {name} "
        f"then writes its own replicas back: plan lws/{namespace}/{name} for the scale its "
        "owner makes")
    return prediction


def _workers_by_group(view: ClusterView, namespace: str, name: str) -> dict[int, list[RankedPod]]:
    """The active workers of LeaderWorkerSet `name`'s groups, by group index, by worker
    index."""
    found: dict[int, list[tuple[int, RankedPod]]] = {}
    for facts in set_pods(view, namespace, name):
        where = group_position(facts, name) if facts.active else None
        if where is not None and where[1] > 0:
            found.setdefault(where[0], []).append((where[1], ranked_pod(facts, 0)))
    return {group: [pod for _, pod in sorted(members, key=lambda m: m[0])]
            for group, members in found.items()}


def _group_of(leader: RankedPod, name: str) -> int | None:
    where = group_position(leader.facts, name)
    return where[0] if where is not None else None
