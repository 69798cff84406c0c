"""Which pods a ReplicaSet deletes first: a port of Kubernetes' ActivePodsWithRanks.

Sources: pkg/controller/controller_utils.go (`ActivePodsWithRanks.Less`,
`IsPodActive`) and pkg/controller/replicaset/replica_set.go (`getPodsToDelete`,
`getPodsRankedByRelatedPodsOnSameNode`, `burstReplicas`).

Rules 1-5 of the comparator form a lexicographic key and so a strict weak order.
Rules 6-8 do not (equal ready times fall through to restarts, equal log buckets
return the UID order), and Go sorts with the unstable `sort.Sort` over an informer
list whose order we cannot see. Pods that tie on rules 1-5 with the cut are
therefore reported as uncertain rather than pretended away.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cmp_to_key
from operator import attrgetter
from typing import Any

from .deletion_cost import deletion_cost_of
from .kube import name_of, namespace_of, parse_time_ns, spec_of, status_of

BURST_REPLICAS = 500  # pkg/controller/replicaset: BurstReplicas, deletions per sync
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}
_LN2_INVERSE = 1 / math.log(2)


def is_pod_active(pod: Mapping[str, Any]) -> bool:
    """controller.IsPodActive: not Succeeded, not Failed, not being deleted."""
    phase = status_of(pod).get("phase")
    return phase not in ("Succeeded", "Failed") and not (pod.get("metadata") or {}).get(
        "deletionTimestamp"
    )


def ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first condition of type Ready (podutil.GetPodReadyCondition)."""
    for condition in status_of(pod).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition
    return None


def max_restarts(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(regular, sidecar) maximum restart counts, as controller.maxContainerRestarts."""
    status = pod.get("status") or {}
    regular = 0
    for container in status.get("containerStatuses") or ():
        regular = max(regular, int(container.get("restartCount") or 0))
    init_statuses = status.get("initContainerStatuses")
    if not init_statuses:
        return regular, 0
    sidecar_names = {
        c.get("name")
        for c in (pod.get("spec") or {}).get("initContainers") or ()
        if c.get("restartPolicy") == "Always"
    }
    sidecar = 0
    for container in init_statuses:
        if container.get("name") in sidecar_names:
            sidecar = max(sidecar, int(container.get("restartCount") or 0))
    return regular, sidecar


@dataclass(slots=True)
class RankedPod:
    """A pod with the facts the comparator reads, computed once."""

    pod: Mapping[str, Any]
    name: str
    namespace: str
    uid: bytes
    node_name: str
    phase_ordinal: int
    ready: bool
    deletion_cost: int
    rank: int
    ready_time_ns: int | None
    restarts: int
    sidecar_restarts: int
    created_ns: int | None
    ready_bucket: int = -1  # int(log2(now - ready time)), -1 when not positive
    created_bucket: int = -1
    bucket_now: int | None = None  # the clock the buckets were computed against
    replica_set: str = ""  # the owning ReplicaSet, filled in for Deployment predictions
    key_rules_1_to_5: tuple[bool, int, bool, int, int] = (False, 0, False, 0, 0)
    sort_key: tuple[Any, ...] = ()

    def rekey(self, now_ns: int | None) -> None:
        """Recompute the sort keys after a change of rank or clock."""
        _refresh_buckets(self, now_ns)
        # Rules 1-5 as a key, smaller first: unscheduled, phase, not ready, cost, more related.
        self.key_rules_1_to_5 = (bool(self.node_name), self.phase_ordinal, self.ready,
                                 self.deletion_cost, -self.rank)
        self.sort_key = (self.key_rules_1_to_5, within_group_key(self))


def ranked_pod(pod: Mapping[str, Any], rank: int, now_ns: int | None = None) -> RankedPod:
    """Read the comparator's facts from a pod dict (log buckets against `now_ns`)."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    condition = ready_condition(pod)
    ready = condition is not None and condition.get("status") == "True"
    restarts, sidecar = max_restarts(pod)
    ready_ns = parse_time_ns(condition.get("lastTransitionTime")) if ready else None
    created_ns = parse_time_ns(metadata.get("creationTimestamp"))
    ranked = RankedPod(
        pod=pod,
        name=metadata.get("name") or "",
        namespace=metadata.get("namespace") or "",
        uid=(metadata.get("uid") or "").encode(),
        node_name=(pod.get("spec") or {}).get("nodeName") or "",
        phase_ordinal=_PHASE_ORDINAL.get(status.get("phase") or "", 0),
        ready=ready,
        deletion_cost=deletion_cost_of(metadata.get("annotations")),
        rank=rank,
        ready_time_ns=ready_ns,
        restarts=restarts,
        sidecar_restarts=sidecar,
        created_ns=created_ns,
        ready_bucket=log_bucket(ready_ns, now_ns),
        created_bucket=log_bucket(created_ns, now_ns),
        bucket_now=now_ns,
    )
    ranked.rekey(now_ns)
    return ranked


def _refresh_buckets(pod: RankedPod, now_ns: int | None) -> None:
    if pod.bucket_now != now_ns:
        pod.ready_bucket = log_bucket(pod.ready_time_ns, now_ns)
        pod.created_bucket = log_bucket(pod.created_ns, now_ns)
        pod.bucket_now = now_ns


def go_log2(value: float) -> float:
    """math.Log2 as Go computes it (exact for powers of two, frexp otherwise)."""
    fraction, exponent = math.frexp(value)
    if fraction == 0.5:
        return float(exponent - 1)
    return math.log(fraction) * _LN2_INVERSE + exponent


def log_bucket(time_ns: int | None, now_ns: int | None) -> int:
    """int(log2(now - t)) in nanoseconds as logarithmicRankDiff computes it; -1 if not positive."""
    if time_ns is None or now_ns is None:
        return -1
    age = now_ns - time_ns
    return int(go_log2(float(age))) if age > 0 else -1


def _compare_times(t_i: int | None, t_j: int | None, bucket_i: int, bucket_j: int,
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
    if a.node_name != b.node_name and (not a.node_name or not b.node_name):
        return -1 if not a.node_name else 1
    if a.phase_ordinal != b.phase_ordinal:
        return -1 if a.phase_ordinal < b.phase_ordinal else 1
    if a.ready != b.ready:
        return -1 if not a.ready else 1
    if a.deletion_cost != b.deletion_cost:
        return -1 if a.deletion_cost < b.deletion_cost else 1
    if a.rank != b.rank:
        return -1 if a.rank > b.rank else 1
    if a.bucket_now != now_ns or b.bucket_now != now_ns:
        _refresh_buckets(a, now_ns)
        _refresh_buckets(b, now_ns)
    if a.ready and b.ready and a.ready_time_ns != b.ready_time_ns:
        return _compare_times(a.ready_time_ns, b.ready_time_ns, a.ready_bucket, b.ready_bucket,
                              now_ns, a.uid, b.uid)
    if a.restarts != b.restarts:
        return -1 if a.restarts > b.restarts else 1
    if a.sidecar_restarts != b.sidecar_restarts:
        return -1 if a.sidecar_restarts > b.sidecar_restarts else 1
    if a.created_ns != b.created_ns:
        return _compare_times(a.created_ns, b.created_ns, a.created_bucket, b.created_bucket,
                              now_ns, a.uid, b.uid)
    return 0


def related_pods_per_node(related_pods: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """Active related pods per node name (getPodsRankedByRelatedPodsOnSameNode)."""
    return Counter(
        (spec_of(pod).get("nodeName") or "") for pod in related_pods if is_pod_active(pod)
    )


def rank_pods(
    pods: Sequence[Mapping[str, Any]],
    related_pods: Iterable[Mapping[str, Any]],
    now_ns: int | None,
) -> list[RankedPod]:
    """Pods in the order the ReplicaSet controller deletes them (best prediction)."""
    per_node = related_pods_per_node(related_pods)
    ranked = [ranked_pod(pod, per_node[spec_of(pod).get("nodeName") or ""], now_ns)
              for pod in pods]
    return sort_ranked(ranked, now_ns)


def within_group_key(pod: RankedPod, class_uid: bytes = b"") -> tuple[Any, ...]:
    """Rules 6-8 as a sort key, for pods already tied on rules 1-5.

    Without a clock (afterOrZero) rules 6-8 are lexicographic and this key is exact.
    With one they are not a strict weak order (equal ready times fall through to
    restarts, equal log2 buckets return the UID order), so no key matches everywhere.
    Ready pods sort by bucket, then by `class_uid`, the smallest UID among the pods that
    became ready at the same instant, then by restarts and age inside such a class. That
    is exact when ready times in a bucket are all distinct (UID order) or all equal
    (restarts, then age); mixtures are approximated, and `TieGroup` reports them.
    """
    if pod.bucket_now is None:
        created_part: tuple[Any, ...] = (pod.created_ns is not None, -(pod.created_ns or 0))
        rest = (-pod.restarts, -pod.sidecar_restarts, *created_part, pod.uid)
        if pod.ready:
            return (pod.ready_time_ns is not None, -(pod.ready_time_ns or 0), *rest)
        return rest
    created_part = (pod.created_ns is not None, pod.created_bucket)
    rest = (-pod.restarts, -pod.sidecar_restarts, *created_part, pod.uid)
    if pod.ready:
        return (pod.ready_time_ns is not None, pod.ready_bucket, class_uid,
                pod.ready_time_ns or 0, *rest)
    return rest


_SORT_KEY = attrgetter("sort_key")


def sort_ranked(ranked: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """Deletion order: rules 1-5 exactly, rules 6-8 through `within_group_key`."""
    for pod in ranked:
        if pod.bucket_now != now_ns:
            pod.rekey(now_ns)
    if now_ns is None:
        return sorted(ranked, key=_SORT_KEY)
    ready_classes: dict[tuple[Any, ...], bytes] = {}
    for pod in ranked:
        if pod.ready:
            instant = (pod.key_rules_1_to_5, pod.ready_time_ns)
            known = ready_classes.get(instant)
            if known is None or pod.uid < known:
                ready_classes[instant] = pod.uid

    def key(pod: RankedPod) -> tuple[Any, ...]:
        if not pod.ready:
            return pod.sort_key
        uid = ready_classes[(pod.key_rules_1_to_5, pod.ready_time_ns)]
        return (pod.key_rules_1_to_5, within_group_key(pod, uid))

    return sorted(ranked, key=key)


def sort_exactly(pods: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """Sort with the comparator itself, as Go's sort.Sort would call it."""
    return sorted(pods, key=cmp_to_key(lambda a, b: compare_pods(a, b, now_ns)))


@dataclass
class TieGroup:
    """Pods tied with the cut on rules 1-5: `removed` of them go, which ones is not knowable."""

    members: list[RankedPod]
    removed: int


@dataclass
class Deletion:
    """The outcome of scaling one ReplicaSet's active pods down to `replicas`."""

    order: list[RankedPod]
    victims: list[RankedPod]
    tie_groups: list[TieGroup] = field(default_factory=list)

    @property
    def possible_victims(self) -> list[RankedPod]:
        """Survivors that might be removed instead of a predicted victim."""
        return possible_victims(self.victims, self.tie_groups)


def possible_victims(victims: list[RankedPod], tie_groups: list[TieGroup]) -> list[RankedPod]:
    """Members of the tie groups that are not predicted victims."""
    victim_ids = {id(p) for p in victims}
    return [p for g in tie_groups for p in g.members if id(p) not in victim_ids]


def _cut_tie_group(ordered: list[RankedPod], cut: int,
                   now_ns: int | None) -> TieGroup | None:
    """The pods sharing the rules 1-5 key across the cut, if the cut splits a group.

    That group is re-sorted in place with the exact comparator, so the predicted
    victims inside it are the ones the comparator itself would put first.
    """
    if cut <= 0 or cut >= len(ordered):
        return None
    key = ordered[cut - 1].key_rules_1_to_5
    if ordered[cut].key_rules_1_to_5 != key:
        return None
    start = cut - 1
    while start > 0 and ordered[start - 1].key_rules_1_to_5 == key:
        start -= 1
    end = cut + 1
    while end < len(ordered) and ordered[end].key_rules_1_to_5 == key:
        end += 1
    ordered[start:end] = sort_exactly(ordered[start:end], now_ns)
    return TieGroup(members=ordered[start:end], removed=cut - start)


def predict_deletions(
    pods: Sequence[Mapping[str, Any]],
    related_pods: Sequence[Mapping[str, Any]],
    replicas: int,
    now_ns: int | None,
    burst: int = BURST_REPLICAS,
) -> Deletion:
    """Victims when a ReplicaSet owning `pods` is scaled to `replicas`.

    `related_pods` are the pods matched by every ReplicaSet with the same controller
    (the rank basis). Deletions above `burst` are simulated sync by sync: each sync
    re-ranks what is left, as the controller does once the previous batch is gone
    (a deleted pod is inactive, so it no longer counts towards its node's rank).
    """
    related_active = [p for p in related_pods if is_pod_active(p)]
    per_node = Counter((spec_of(p).get("nodeName") or "") for p in related_active)
    counted = {(namespace_of(p), name_of(p)) for p in related_active}
    active_ids = {id(p) for p in related_active}
    remaining = [ranked_pod(pod, per_node[spec_of(pod).get("nodeName") or ""], now_ns)
                 for pod in pods if id(pod) in active_ids or is_pod_active(pod)]
    diff = len(remaining) - max(replicas, 0)
    victims: list[RankedPod] = []
    groups: list[TieGroup] = []
    while True:
        ordered = sort_ranked(remaining, now_ns)
        batch = min(diff, burst)
        if batch <= 0:
            return Deletion(order=victims + ordered, victims=victims, tie_groups=groups)
        # getPodsToDelete sorts only when some pods survive the batch.
        group = _cut_tie_group(ordered, batch, now_ns) if batch < len(ordered) else None
        if group:
            groups.append(group)
        victims.extend(ordered[:batch])
        remaining = ordered[batch:]
        diff -= batch
        if diff <= 0:
            return Deletion(order=victims + remaining, victims=victims, tie_groups=groups)
        touched = set()
        for gone in ordered[:batch]:
            if (gone.namespace, gone.name) in counted:
                per_node[gone.node_name] -= 1
                touched.add(gone.node_name)
        for pod in remaining:
            if pod.node_name in touched:
                pod.rank = per_node[pod.node_name]
                pod.rekey(now_ns)


def deciding_rule(victim: RankedPod, survivor: RankedPod) -> str:
    """In a few words, the first comparator rule that puts `victim` before `survivor`."""
    if bool(victim.node_name) != bool(survivor.node_name):
        return "not scheduled"
    if victim.phase_ordinal != survivor.phase_ordinal:
        return {0: "phase Pending", 1: "phase Unknown"}.get(victim.phase_ordinal, "phase")
    if victim.ready != survivor.ready:
        return "not ready"
    if victim.deletion_cost != survivor.deletion_cost:
        return f"deletion cost {victim.deletion_cost} < {survivor.deletion_cost}"
    if victim.rank != survivor.rank:
        return f"{victim.rank} related pods on its node > {survivor.rank}"
    return (f"tied with {survivor.name} on rules 1-5: age, restarts and the controller's "
            "order decide")
