"""Which pods a ReplicaSet deletes first, as the controller specifies it.

A port of Kubernetes' ActivePodsWithRanks: pkg/controller/controller_utils.go
(`ActivePodsWithRanks.Less`, `IsPodActive`, `maxContainerRestarts`) and the rank of
pkg/controller/replicaset/replica_set.go (`getPodsRankedByRelatedPodsOnSameNode`).
`compare_pods` is the specification: the faster orders in `sort_keys` and the sync
simulation in `replicaset_sync` are pinned to it by the property tests.

Rules 1-5 of the comparator form a lexicographic key and so a strict weak order.
Rules 6-8 do not (equal ready times fall through to restarts, equal log buckets
return the UID order), and Go sorts with the unstable `sort.Sort` over an informer
list whose order we cannot see. Pods that tie on rules 1-5 with the cut are
therefore reported as uncertain (`model/tie_group.py`) rather than pretended away. The
ranked pod the comparator orders is the model's (`model/ranked_pod.py`), shared by every
kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any

from ..model.ranked_pod import RankedPod
from ..objects.kube import status_of
from ..objects.podfacts import PodFacts


def is_pod_active(pod: Mapping[str, Any]) -> bool:
    """controller.IsPodActive: not Succeeded, not Failed, not being deleted."""
    phase = status_of(pod).get("phase")
    return phase not in ("Succeeded", "Failed") and not (pod.get("metadata") or {}).get(
        "deletionTimestamp"
    )


def max_restarts(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(regular, sidecar) maximum restart counts, as controller.maxContainerRestarts."""
    return PodFacts(pod).restarts, PodFacts(pod).sidecar_restarts


def facts_of(pods: Iterable[Mapping[str, Any] | PodFacts]) -> list[PodFacts]:
    """Facts for each pod; facts built earlier (by a cache) are taken as they are."""
    pods = list(pods)
    if all(map(_is_facts, pods)):
        return pods  # type: ignore[return-value]
    return [pod if isinstance(pod, PodFacts) else PodFacts(pod) for pod in pods]


def _is_facts(pod: object) -> bool:
    return type(pod) is PodFacts


def compare_times(t_i: int | None, t_j: int | None, bucket_i: int, bucket_j: int,
                   now_ns: int | None, uid_i: bytes, uid_j: bytes) -> int:
    """Rules 6 and 8 for unequal times: zero first, then log buckets, then UID."""
    if t_i is None or t_j is None or now_ns is None:
        # afterOrZero: the zero time goes first, else the later one.
        if t_i is None or t_j is None:
            return -1 if t_i is None else 1
        return -1 if t_i > t_j else 1
    if bucket_i == bucket_j:
        # Go returns `uid_i < uid_j` here and stops: equal UIDs are equivalent (Less is
        # false both ways), which a three-way compare must report as 0, not 1 both ways.
        if uid_i == uid_j:
            return 0
        return -1 if uid_i < uid_j else 1
    return -1 if bucket_i < bucket_j else 1


def compare_pods(a: RankedPod, b: RankedPod, now_ns: int | None) -> int:
    """ActivePodsWithRanks.Less as a three-way compare: -1 when `a` is deleted first.

    Returns 0 only when Less is false both ways for rules 1-8 in order.
    """
    fa, fb = a.facts, b.facts
    if fa.node_name != fb.node_name and (not fa.node_name or not fb.node_name):
        return -1 if not fa.node_name else 1
    if fa.phase_ordinal != fb.phase_ordinal:
        return -1 if fa.phase_ordinal < fb.phase_ordinal else 1
    if fa.ready != fb.ready:
        return -1 if not fa.ready else 1
    if fa.deletion_cost != fb.deletion_cost:
        return -1 if fa.deletion_cost < fb.deletion_cost else 1
    if a.rank != b.rank:
        return -1 if a.rank > b.rank else 1
    if fa.ready and fb.ready and fa.ready_time_ns != fb.ready_time_ns:
        return compare_times(fa.ready_time_ns, fb.ready_time_ns, a.buckets(now_ns)[0],
                              b.buckets(now_ns)[0], now_ns, fa.uid, fb.uid)
    if fa.restarts != fb.restarts:
        return -1 if fa.restarts > fb.restarts else 1
    if fa.sidecar_restarts != fb.sidecar_restarts:
        return -1 if fa.sidecar_restarts > fb.sidecar_restarts else 1
    if fa.created_ns != fb.created_ns:
        return compare_times(fa.created_ns, fb.created_ns, a.buckets(now_ns)[1],
                              b.buckets(now_ns)[1], now_ns, fa.uid, fb.uid)
    return 0


class RelatedPods:
    """The related pods (only they count towards a node's rank), by namespace and name as
    the controller tells pods apart.

    Pods usually come from the same view as the related pods, so identity answers at
    once; names are compared only for a pod that is not one of the related objects.
    """

    def __init__(self, related: list[PodFacts]) -> None:
        self.related = related
        self.ids = set(map(id, related))
        self.refs: set[tuple[str, str]] | None = None

    def has(self, facts: PodFacts) -> bool:
        if id(facts) in self.ids:
            return True
        if self.refs is None:
            self.refs = set(map(_REF, self.related))
        return facts.ref in self.refs


_REF = attrgetter("ref")
