"""A LeaderWorkerSet's scale-down predicted: whole groups, highest index first.

Source: sigs.k8s.io/lws pkg/controllers (see `leader_worker_set`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model.blocked import Blocked
from ..model.prediction import ScalePrediction, empty_prediction
from ..model.ranked_pod import RankedPod
from ..model.tie_group import TieGroup
from ..view.cluster import ClusterView
from .leader_worker_set import (
    BLOCKED,
    REPLACED,
    VICTIM,
    LwsGroup,
    scale_groups,
    workers_wait_for_leader,
)


def predict_leader_worker_set(view: ClusterView, lws: Mapping[str, Any], to_replicas: int,
                              now_ns: int | None = None, burst: int = 0) -> ScalePrediction:
    """Whole groups go, highest index first (`leader_worker_set`); the surge groups the
    controller keeps for now are `blocked`; the outdated groups a rolling update under way
    may recreate are possible victims, all of them gone in the worst case (one group of
    them with a reason). No prefix order: a smaller target removes whole groups, not a
    prefix of pods (`assessment` counts groups instead). Group indexes decide, so the
    clock and the sync size (`now_ns`, `burst`) play no part."""
    prediction = empty_prediction(lws, to_replicas)
    scale = scale_groups(view, lws, to_replicas)
    prediction.units = list(scale.groups)
    prediction.pods_per_replica = scale.size
    prediction.pods_not_created = (scale.size - 1) * sum(
        1 for group in scale.groups if workers_wait_for_leader(lws, group))
    prediction.reasons = _reasons(scale.groups, to_replicas)
    replaced: list[RankedPod] = []
    for group in scale.groups:
        if group.fate == VICTIM:
            prediction.victims.extend(group.pods)
        elif group.fate == BLOCKED and scale.wait is not None:
            prediction.blocked.extend(Blocked(pod, scale.wait) for pod in group.pods)
        else:
            prediction.survivors.extend(group.pods)
            if group.fate == REPLACED:
                replaced.extend(group.pods)
    if replaced:
        prediction.tie_groups = [TieGroup(replaced, len(replaced), why=(
            "its group is of an old revision: the rolling update under way may delete and "
            "recreate it (when depends on the readiness of the replacements)"))]
    prediction.order = (prediction.victims + [b.pod for b in prediction.blocked]
                        + prediction.survivors)
    prediction.notes.extend(scale.notes)
    return prediction


def _reasons(groups: list[LwsGroup], to_replicas: int) -> dict[str, str]:
    """Why each pod of a condemned group goes, by pod name."""
    reasons = {}
    for group in groups:
        if group.index < to_replicas:
            continue
        where = f"group {group.index} at or above the new count {to_replicas}"
        if group.leader is not None:
            reasons[group.leader.name] = f"leader of {where}"
        for worker in group.workers:
            reasons[worker.name] = (f"worker of {where} (garbage-collected with its "
                                    "leader's worker StatefulSet)")
    return reasons
