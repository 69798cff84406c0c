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
from typing import Any

from .deletion_cost import deletion_cost_of
from .kube import annotations_of, name_of, namespace_of, parse_time_ns, spec_of, status_of, uid_of

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


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    condition = ready_condition(pod)
    return condition is not None and condition.get("status") == "True"


def max_restarts(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(regular, sidecar) maximum restart counts, as controller.maxContainerRestarts."""
    status = status_of(pod)
    regular = max((int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []),
                  default=0)
    sidecar_names = {
        c.get("name")
        for c in spec_of(pod).get("initContainers") or []
        if c.get("restartPolicy") == "Always"
    }
    sidecar = max(
        (
            int(c.get("restartCount") or 0)
            for c in status.get("initContainerStatuses") or []
            if c.get("name") in sidecar_names
        ),
        default=0,
    )
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
    replica_set: str = ""  # the owning ReplicaSet, filled in for Deployment predictions

    @property
    def key_rules_1_to_5(self) -> tuple[bool, int, bool, int, int]:
        """Rules 1-5 as a sort key: smaller goes first."""
        return (
            bool(self.node_name),
            self.phase_ordinal,
            self.ready,
            self.deletion_cost,
            -self.rank,
        )


def ranked_pod(pod: Mapping[str, Any], rank: int) -> RankedPod:
    """Read the comparator's facts from a pod dict."""
    condition = ready_condition(pod)
    ready = condition is not None and condition.get("status") == "True"
    restarts, sidecar = max_restarts(pod)
    metadata = pod.get("metadata") or {}
    return RankedPod(
        pod=pod,
        name=name_of(pod),
        namespace=namespace_of(pod),
        uid=uid_of(pod).encode(),
        node_name=spec_of(pod).get("nodeName") or "",
        phase_ordinal=_PHASE_ORDINAL.get(status_of(pod).get("phase") or "", 0),
        ready=ready,
        deletion_cost=deletion_cost_of(annotations_of(pod)),
        rank=rank,
        ready_time_ns=parse_time_ns(condition.get("lastTransitionTime")) if ready else None,
        restarts=restarts,
        sidecar_restarts=sidecar,
        created_ns=parse_time_ns(metadata.get("creationTimestamp")),
    )


def go_log2(value: float) -> float:
    """math.Log2 as Go computes it (exact for powers of two, frexp otherwise)."""
    fraction, exponent = math.frexp(value)
    if fraction == 0.5:
        return float(exponent - 1)
    return math.log(fraction) * _LN2_INVERSE + exponent


def _log_bucket(time_ns: int, now_ns: int) -> int:
    age = now_ns - time_ns
    return int(go_log2(float(age))) if age > 0 else -1


def _compare_times(t_i: int | None, t_j: int | None, now_ns: int | None,
                   uid_i: bytes, uid_j: bytes) -> int:
    """Rules 6 and 8 for unequal times: zero first, then log buckets, then UID."""
    if t_i is None or t_j is None or now_ns is None:
        # afterOrZero: the zero time goes first, else the later one.
        if t_i is None or t_j is None:
            return -1 if t_i is None else 1
        return -1 if t_i > t_j else 1
    diff = _log_bucket(t_i, now_ns) - _log_bucket(t_j, now_ns)
    if diff == 0:
        # Go returns `uid_i < uid_j` here and stops: equal UIDs are equivalent (Less is
        # false both ways), which a three-way compare must report as 0, not 1 both ways.
        if uid_i == uid_j:
            return 0
        return -1 if uid_i < uid_j else 1
    return -1 if diff < 0 else 1


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
    if a.ready and b.ready and a.ready_time_ns != b.ready_time_ns:
        return _compare_times(a.ready_time_ns, b.ready_time_ns, now_ns, a.uid, b.uid)
    if a.restarts != b.restarts:
        return -1 if a.restarts > b.restarts else 1
    if a.sidecar_restarts != b.sidecar_restarts:
        return -1 if a.sidecar_restarts > b.sidecar_restarts else 1
    if a.created_ns != b.created_ns:
        return _compare_times(a.created_ns, b.created_ns, now_ns, a.uid, b.uid)
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
    ranked = [ranked_pod(pod, per_node[spec_of(pod).get("nodeName") or ""]) for pod in pods]
    return sort_ranked(ranked, now_ns)


def sort_ranked(ranked: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """Sort by rules 1-5 as a key, then each tie group by the full comparator."""
    ranked.sort(key=lambda p: p.key_rules_1_to_5)
    comparator = cmp_to_key(lambda a, b: compare_pods(a, b, now_ns))
    start = 0
    for end in range(1, len(ranked) + 1):
        if end == len(ranked) or ranked[end].key_rules_1_to_5 != ranked[start].key_rules_1_to_5:
            if end - start > 1:
                ranked[start:end] = sorted(ranked[start:end], key=comparator)
            start = end
    return ranked


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
        victim_ids = {id(p) for p in self.victims}
        return [p for g in self.tie_groups for p in g.members if id(p) not in victim_ids]


def _tie_group_at_cut(ordered: list[RankedPod], cut: int) -> TieGroup | None:
    """The pods sharing the rules 1-5 key across the cut, if the cut splits a group."""
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
    re-ranks what is left, as the controller does after the previous batch is gone.
    """
    remaining = [p for p in pods if is_pod_active(p)]
    related = [p for p in related_pods if is_pod_active(p)]
    diff = len(remaining) - max(replicas, 0)
    victims: list[RankedPod] = []
    groups: list[TieGroup] = []
    first_order: list[RankedPod] | None = None
    while True:
        ordered = rank_pods(remaining, related, now_ns)
        if first_order is None:
            first_order = ordered
        batch = min(diff, burst)
        if batch <= 0:
            break
        # getPodsToDelete sorts only when some pods survive the batch.
        group = _tie_group_at_cut(ordered, batch) if batch < len(ordered) else None
        if group:
            groups.append(group)
        victims.extend(ordered[:batch])
        gone = {(p.namespace, p.name) for p in ordered[:batch]}
        remaining = [p.pod for p in ordered[batch:]]
        related = [p for p in related if (namespace_of(p), name_of(p)) not in gone]
        diff -= batch
        if diff <= 0:
            return Deletion(order=victims + ordered[batch:], victims=victims, tie_groups=groups)
    return Deletion(order=first_order or [], victims=[], tie_groups=[])


def deciding_rule(victim: RankedPod, survivor: RankedPod, now_ns: int | None) -> str:
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
