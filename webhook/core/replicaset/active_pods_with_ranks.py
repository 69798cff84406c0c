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
therefore reported as uncertain (`TieGroup`) rather than pretended away.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from ..objects.kube import status_of
from ..objects.podfacts import PodFacts, bucket_window


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


_RANKED_DEFAULTS: dict[str, Any] = {"key": 0, "replica_set": "", "_buckets": None}


class RankedPod:
    """A pod's facts plus what one prediction adds: its rank and its sort key.

    The facts are shared and read-only; rank, keys and ReplicaSet belong to this
    prediction alone.
    """

    __slots__ = ("_buckets", "facts", "key", "less", "live", "rank", "replica_set", "sync")

    def __init__(self, facts: PodFacts, rank: int = 0) -> None:
        # Set here: the facts and the rank. Set before they are read: `key` (rules 1-8 as
        # an integer, see podfacts) when sorted, `replica_set` (the owning ReplicaSet) by
        # the prediction; unset ones read as their defaults (__getattr__).
        self.facts = facts
        self.rank = rank
        self.sync = 0  # replicaset_sync.GONE once deleted by a simulated sync
        # Its stand-in in a comparator sort against this prediction's clock
        # (`sort_keys.Less`).
        self.less: Any = None

    def __getattr__(self, name: str) -> Any:
        if name in _RANKED_DEFAULTS:
            return _RANKED_DEFAULTS[name]
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"RankedPod({self.facts.namespace}/{self.facts.name}, rank={self.rank})"

    # The facts, read through (attrgetter: C speed).
    pod = property(attrgetter("facts.pod"), doc="The pod object the facts came from.")
    name = property(attrgetter("facts.name"))
    namespace = property(attrgetter("facts.namespace"))
    uid = property(attrgetter("facts.uid"))
    node_name = property(attrgetter("facts.node_name"))
    phase_ordinal = property(attrgetter("facts.phase_ordinal"))
    ready = property(attrgetter("facts.ready"))
    deletion_cost = property(attrgetter("facts.deletion_cost"))
    ready_time_ns = property(attrgetter("facts.ready_time_ns"))
    restarts = property(attrgetter("facts.restarts"))
    sidecar_restarts = property(attrgetter("facts.sidecar_restarts"))
    created_ns = property(attrgetter("facts.created_ns"))

    @property
    def key_rules_1_to_5(self) -> tuple[bool, int, bool, int, int]:
        """Rules 1-5 as a key, smaller first: unscheduled, phase, not ready, cost, more related."""
        facts = self.facts
        return (bool(facts.node_name), facts.phase_ordinal, facts.ready, facts.deletion_cost,
                -self.rank)

    def buckets(self, now_ns: int | None) -> tuple[int, int]:
        """(ready bucket, creation bucket) against `now_ns`, remembered for the last clock."""
        cached = self._buckets
        if cached is None or cached[0] != now_ns:
            cached = (now_ns, log_bucket(self.facts.ready_time_ns, now_ns),
                      log_bucket(self.facts.created_ns, now_ns))
            self._buckets = cached
        return cached[1], cached[2]


def ranked_pod(pod: Mapping[str, Any] | PodFacts, rank: int) -> RankedPod:
    """A pod (dict or facts) with its rank; its sort key is set when a set of pods is sorted."""
    return RankedPod(pod if isinstance(pod, PodFacts) else PodFacts(pod), rank)


def log_bucket(time_ns: int | None, now_ns: int | None) -> int:
    """int(log2(now - t)) in nanoseconds as logarithmicRankDiff computes it; -1 if not positive."""
    if time_ns is None or now_ns is None:
        return -1
    return bucket_window(time_ns, now_ns)[0]


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


@dataclass
class TieGroup:
    """Pods tied with the cut on rules 1-5: `removed` of them go, which ones is not knowable.

    Members that are also `blocked` in the prediction are not counted in `removed` (it
    counts what goes without waiting); they go too once the controller stops waiting.

    `why` says why the members may go when it is not such a tie (a race between
    controllers whose outcome decides whether they go at all)."""

    members: list[RankedPod]
    removed: int
    why: str | None = None


def possible_victims(victims: list[RankedPod], tie_groups: list[TieGroup]) -> list[RankedPod]:
    """Members of the tie groups that are not predicted victims."""
    victim_ids = {id(p) for p in victims}
    return [p for g in tie_groups for p in g.members if id(p) not in victim_ids]


def is_certain(victim: RankedPod, tie_groups: list[TieGroup]) -> bool:
    """No other pod may go in this victim's place: it is in no tie group of which only
    some members go (a group whose members may all go, a race's, keeps it certain)."""
    return not any(g.removed < len(g.members) and any(p is victim for p in g.members)
                   for g in tie_groups)


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
