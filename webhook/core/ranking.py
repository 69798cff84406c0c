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

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cmp_to_key
from operator import attrgetter
from typing import Any

from .kube import status_of
from .podfacts import (
    CLOCK_WITHIN_BITS,
    NO_CLOCK_WITHIN_BITS,
    PodFacts,
    bucket_window,
    rank_field,
    uid_order_keys,
)

BURST_REPLICAS = 500  # pkg/controller/replicaset: BurstReplicas, deletions per sync


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
    if all(type(pod) is PodFacts for pod in pods[:1]) and all(map(_IS_FACTS, pods)):
        return pods  # type: ignore[return-value]
    return [pod if isinstance(pod, PodFacts) else PodFacts(pod) for pod in pods]


def _is_facts(pod: object) -> bool:
    return type(pod) is PodFacts


_IS_FACTS = _is_facts


_RANKED_DEFAULTS: dict[str, Any] = {"key": 0, "replica_set": "", "_buckets": None}


class RankedPod:
    """A pod's facts plus what one prediction adds: its rank and its sort key.

    The facts are shared and read-only; rank, keys and ReplicaSet belong to this
    prediction alone.
    """

    __slots__ = ("_buckets", "facts", "key", "live", "rank", "replica_set", "sync")

    def __init__(self, facts: PodFacts, rank: int) -> None:
        # Set here: the facts and the rank. Set before they are read: `key` (rules 1-8 as
        # an integer, see podfacts) when sorted, `replica_set` (the owning ReplicaSet) by
        # the prediction; unset ones read as their defaults (__getattr__).
        self.facts = facts
        self.rank = rank
        self.sync = 0  # the last simulated sync that re-keyed this pod; _GONE once deleted

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


def ranked_pod(pod: Mapping[str, Any] | PodFacts, rank: int,
               now_ns: int | None = None) -> RankedPod:
    """A pod (dict or facts) with its rank; `now_ns` is accepted for compatibility."""
    del now_ns  # keys are computed when a set of pods is sorted
    return RankedPod(pod if isinstance(pod, PodFacts) else PodFacts(pod), rank)


def log_bucket(time_ns: int | None, now_ns: int | None) -> int:
    """int(log2(now - t)) in nanoseconds as logarithmicRankDiff computes it; -1 if not positive."""
    if time_ns is None or now_ns is None:
        return -1
    return bucket_window(time_ns, now_ns)[0]


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
        return _compare_times(fa.ready_time_ns, fb.ready_time_ns, a.buckets(now_ns)[0],
                              b.buckets(now_ns)[0], now_ns, fa.uid, fb.uid)
    if fa.restarts != fb.restarts:
        return -1 if fa.restarts > fb.restarts else 1
    if fa.sidecar_restarts != fb.sidecar_restarts:
        return -1 if fa.sidecar_restarts > fb.sidecar_restarts else 1
    if fa.created_ns != fb.created_ns:
        return _compare_times(fa.created_ns, fb.created_ns, a.buckets(now_ns)[1],
                              b.buckets(now_ns)[1], now_ns, fa.uid, fb.uid)
    return 0


def rank_pods(
    pods: Sequence[Mapping[str, Any] | PodFacts],
    related_pods: Iterable[Mapping[str, Any] | PodFacts],
    now_ns: int | None,
) -> list[RankedPod]:
    """Pods in the order the ReplicaSet controller deletes them (best prediction)."""
    per_node = Counter(f.node_name for f in facts_of(related_pods) if f.active)
    ranked = [RankedPod(f, per_node[f.node_name]) for f in facts_of(pods)]
    return sort_ranked(ranked, now_ns)


_GONE = -1
_RANK_MAX = (1 << 32) - 1
_KEY = attrgetter("key")
_FACTS = attrgetter("facts")
_UID = attrgetter("uid")
_UID_KEY = attrgetter("uid_key")
_READY_TIME = attrgetter("ready_time_ns")
_REST_OF_RULES = attrgetter("restarts", "sidecar_restarts", "created_ns")
_NODE = attrgetter("node_name")
_REF = attrgetter("ref")


class _Keys:
    """Sort keys for one set of ranked pods against one clock.

    The key orders pods by rules 1-5, then by rules 6-8 as far as a key can: without
    a clock they are lexicographic and the key is exact. With one they are not a
    strict weak order (equal ready times fall through to restarts, equal log2 buckets
    return the UID order), so no key matches everywhere. Ready pods sort by bucket,
    then by the smallest UID among the pods of their rules 1-5 group that became ready
    at the same instant (their "class"), then by restarts and age inside a class. That
    is exact when ready times in a bucket are all distinct (UID order) or all equal
    (restarts, then age); mixtures are approximated, and `TieGroup` reports them.
    """

    def __init__(self, pods: Sequence[RankedPod], now_ns: int | None) -> None:
        self.now_ns = now_ns
        self.shift = NO_CLOCK_WITHIN_BITS if now_ns is None else CLOCK_WITHIN_BITS
        facts = list(map(_FACTS, pods))
        self.facts = facts
        long_uids = bool(facts) and min(map(_UID_KEY, facts)) < 0
        self.uid_keys = uid_order_keys(list(map(_UID, facts))) if long_uids else None
        # Pods sharing a ready instant with another ready pod: their class UID depends on
        # which pods share their rules 1-5 group, so it is worked out at every sort.
        self.class_members: list[RankedPod] = []
        if now_ns is not None:
            times = [f.ready_time_ns for f in facts if f.ready]
            if len(set(times)) < len(times):
                shared = {t for t, n in Counter(times).items() if n > 1}
                self.class_members = [p for p in pods
                                      if p.facts.ready and p.facts.ready_time_ns in shared]

    def distinct_uids(self) -> bool:
        """No two pods share a UID (so no two share a key)."""
        return len(set(map(_UID, self.facts))) == len(self.facts)

    def uid_key(self, facts: PodFacts) -> int:
        return facts.uid_key if self.uid_keys is None else self.uid_keys[facts.uid]

    def assign(self, pods: Iterable[RankedPod]) -> None:
        """Set the `key` of `pods` from their facts and current rank."""
        now_ns, shift = self.now_ns, self.shift
        rank_fields: dict[int, int] = {}
        if self.uid_keys is not None or now_ns is None:
            for pod in pods:
                facts = pod.facts
                uid_key = None if self.uid_keys is None else self.uid_keys[facts.uid]
                pod.key = facts.base_key(now_ns, uid_key) | rank_field(pod.rank) << shift
            return
        # The hot loop of a prediction: the facts' memo and the rank field are inlined.
        for pod in pods:
            facts = pod.facts
            memo = facts.memo
            base = (memo[2] if memo is not None and memo[0] <= now_ns < memo[1]
                    else facts.base_key(now_ns))
            rank = pod.rank
            field = rank_fields.get(rank)
            if field is None:
                field = rank_fields[rank] = rank_field(rank) << shift
            pod.key = base | field

    def k15(self, pod: RankedPod) -> int:
        """Rules 1-5 of `pod`'s key."""
        return pod.key >> self.shift

    def assign_classes(self, present: Iterable[RankedPod]) -> None:
        """Put the class UID into the keys of the class members among `present`."""
        shift = self.shift
        classes: dict[tuple[int, int | None], int] = {}
        members = []
        for pod in present:
            instant = (pod.key >> shift, pod.facts.ready_time_ns)
            uid_key = self.uid_key(pod.facts)
            known = classes.get(instant)
            if known is None or uid_key < known:
                classes[instant] = uid_key
            members.append((pod, instant))
        mask = (1 << shift) - 1
        for pod, instant in members:
            within = pod.facts.with_class_uid(pod.key & mask, classes[instant])
            pod.key = (pod.key & ~mask) | within


def sort_ranked(ranked: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """Deletion order: rules 1-5 exactly, rules 6-8 through the key of `_Keys`."""
    keys = _Keys(ranked, now_ns)
    keys.assign(ranked)
    if keys.class_members:
        keys.assign_classes(keys.class_members)
    return sorted(ranked, key=_KEY)


def sort_exactly(pods: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """Sort with the comparator itself, as Go's sort.Sort would call it."""
    return sorted(pods, key=cmp_to_key(lambda a, b: compare_pods(a, b, now_ns)))


def _sort_group_exactly(group: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """`sort_exactly` for pods tied on rules 1-5 given in key order.

    When the comparator is a strict total order on the group that agrees with the key,
    sorting by it leaves the key order as it is, and the comparator need not run:
    ready pods (rule 6 decides every pair) with distinct ready times, or pods whose
    restarts and creation time differ pairwise, with distinct UIDs. Otherwise rules 6-8
    are applied pair by pair, buckets read once.
    """
    facts = list(map(_FACTS, group))
    if len(set(map(_UID, facts))) == len(facts):
        if facts and facts[0].ready:  # a group is all ready or all not ready
            if len(set(map(_READY_TIME, facts))) == len(facts):
                return group
        elif len(set(map(_REST_OF_RULES, facts))) == len(facts):
            return group
    buckets = {id(p): (log_bucket(p.facts.ready_time_ns, now_ns),
                       log_bucket(p.facts.created_ns, now_ns)) for p in group}

    def compare(a: RankedPod, b: RankedPod) -> int:
        fa, fb = a.facts, b.facts
        if fa.ready and fa.ready_time_ns != fb.ready_time_ns:  # a group is all ready or not
            return _compare_times(fa.ready_time_ns, fb.ready_time_ns, buckets[id(a)][0],
                                  buckets[id(b)][0], now_ns, fa.uid, fb.uid)
        if fa.restarts != fb.restarts:
            return -1 if fa.restarts > fb.restarts else 1
        if fa.sidecar_restarts != fb.sidecar_restarts:
            return -1 if fa.sidecar_restarts > fb.sidecar_restarts else 1
        if fa.created_ns != fb.created_ns:
            return _compare_times(fa.created_ns, fb.created_ns, buckets[id(a)][1],
                                  buckets[id(b)][1], now_ns, fa.uid, fb.uid)
        return 0
    return sorted(group, key=cmp_to_key(compare))


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


def _cut_tie_group(ordered: list[RankedPod], cut: int, now_ns: int | None,
                   shift: int) -> TieGroup | None:
    """The pods sharing the rules 1-5 key across the cut, if the cut splits a group.

    That group is re-sorted in place with the exact comparator, so the predicted
    victims inside it are the ones the comparator itself would put first.
    """
    if cut <= 0 or cut >= len(ordered):
        return None
    key = ordered[cut - 1].key >> shift
    if ordered[cut].key >> shift != key:
        return None
    start = cut - 1
    while start > 0 and ordered[start - 1].key >> shift == key:
        start -= 1
    end = cut + 1
    while end < len(ordered) and ordered[end].key >> shift == key:
        end += 1
    ordered[start:end] = _sort_group_exactly(ordered[start:end], now_ns)
    return TieGroup(members=ordered[start:end], removed=cut - start)


def predict_deletions(
    pods: Sequence[Mapping[str, Any] | PodFacts],
    related_pods: Sequence[Mapping[str, Any] | PodFacts],
    replicas: int,
    now_ns: int | None,
    burst: int = BURST_REPLICAS,
) -> Deletion:
    """Victims when a ReplicaSet owning `pods` is scaled to `replicas`.

    `related_pods` are the pods matched by every ReplicaSet with the same controller
    (the rank basis). Deletions above `burst` are simulated sync by sync: each sync
    re-ranks what is left, as the controller does once the previous batch is gone
    (a deleted pod is inactive, so it no longer counts towards its node's rank).
    Pods may be given as dicts or as `PodFacts`.
    """
    return deletions_of_facts(facts_of(pods), facts_of(related_pods), replicas, now_ns, burst)


def deletions_of_facts(pods: Sequence[PodFacts], related_pods: Sequence[PodFacts],
                       replicas: int, now_ns: int | None,
                       burst: int = BURST_REPLICAS) -> Deletion:
    """`predict_deletions` for pods given as facts (what a view keeps)."""
    related_active = [f for f in related_pods if f.active]
    per_node = Counter(map(_NODE, related_active))
    counted = _Counted(related_active)
    remaining = [RankedPod(f, per_node[f.node_name]) for f in pods if f.active]
    keys = _Keys(remaining, now_ns)
    keys.assign(remaining)
    if keys.class_members:
        keys.assign_classes(keys.class_members)
    diff = len(remaining) - max(replicas, 0)
    if diff > burst and keys.distinct_uids():
        return _SyncHeap(keys, remaining, per_node, counted, burst).run(diff)
    return _deletions_by_sorting(keys, remaining, per_node, counted, diff, burst)


def _deletions_by_sorting(keys: _Keys, remaining: list[RankedPod], per_node: Counter[str],
                          counted: _Counted, diff: int, burst: int) -> Deletion:
    """The controller's syncs as written: sort what is left, cut, re-rank, again."""
    victims: list[RankedPod] = []
    groups: list[TieGroup] = []
    ordered = sorted(remaining, key=_KEY)
    while True:
        batch = min(diff, burst)
        if batch <= 0:
            return Deletion(order=victims + ordered, victims=victims, tie_groups=groups)
        # getPodsToDelete sorts only when some pods survive the batch.
        group = (_cut_tie_group(ordered, batch, keys.now_ns, keys.shift)
                 if batch < len(ordered) else None)
        if group:
            groups.append(group)
        gone = ordered[:batch]
        victims.extend(gone)
        remaining = ordered[batch:]
        diff -= batch
        if diff <= 0:
            return Deletion(order=victims + remaining, victims=victims, tie_groups=groups)
        _discount(gone, per_node, counted)
        for pod in remaining:
            pod.rank = per_node[pod.facts.node_name]
        keys.assign(remaining)
        if keys.class_members:
            gone_ids = {id(p) for p in gone}
            keys.class_members = [p for p in keys.class_members if id(p) not in gone_ids]
            keys.assign_classes(keys.class_members)
        ordered = sorted(remaining, key=_KEY)  # stable: equal keys keep the previous order


class _Counted:
    """Membership in the related pods, by namespace and name as the controller counts.

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


def _discount(gone: Iterable[RankedPod], per_node: Counter[str],
              counted: _Counted) -> set[str]:
    """Take deleted pods out of their nodes' counts; the nodes whose rank changed."""
    touched = set()
    for pod in gone:
        facts = pod.facts
        if counted.has(facts):
            per_node[facts.node_name] -= 1
            touched.add(facts.node_name)
    return touched


class _SyncHeap:
    """The controller's syncs with a heap instead of a sort of everything at every sync.

    Same result as `_deletions_by_sorting` when keys are unique (distinct UIDs): a sync
    needs only its batch and the tie group at the cut, so pods are popped in key order
    and everything else stays in the heap. A deletion only lowers ranks, which only
    raises keys, so a pod whose node lost a pod since it was keyed is re-keyed when it
    reaches the top (its old key is a lower bound). Class members (see `_Keys`) can move
    either way and are re-keyed at every sync.
    """

    def __init__(self, keys: _Keys, pods: list[RankedPod], per_node: Counter[str],
                 counted: _Counted, burst: int) -> None:
        self.keys, self.pods, self.per_node = keys, pods, per_node
        self.counted, self.burst = counted, burst
        self.shift = keys.shift
        self.node_epoch: Counter[str] = Counter()  # node -> how often its rank changed
        # Per pod: `live`, the key of its one valid heap entry (None once taken out), and
        # `sync`, its node's epoch when keyed (0 from RankedPod(); _GONE once deleted).
        self.heap = list(map(_KEY, pods))
        for pod, key in zip(pods, self.heap, strict=True):
            pod.live = key
        self.owner = dict(zip(self.heap, pods, strict=True))  # entry -> pod, stale ones too
        heapq.heapify(self.heap)
        # Class members by ready instant and by node, to re-key only the changed classes.
        self.members_at: dict[int | None, list[RankedPod]] = {}
        self.members_on: dict[str, list[RankedPod]] = {}
        for pod in keys.class_members:
            self.members_at.setdefault(pod.facts.ready_time_ns, []).append(pod)
            self.members_on.setdefault(pod.facts.node_name, []).append(pod)

    def run(self, diff: int) -> Deletion:
        victims: list[RankedPod] = []
        groups: list[TieGroup] = []
        while True:
            batch = min(diff, self.burst)
            diff -= batch
            final = diff <= 0
            taken, group = self._sync(batch, final)
            victims.extend(taken)
            if group is not None:
                groups.append(group)
            if final:
                survivors = group.members[group.removed:] if group else []
                return Deletion(order=victims + survivors + self._rest(), victims=victims,
                                tie_groups=groups)
            touched = _discount(taken, self.per_node, self.counted)
            self.node_epoch.update(touched)
            self._refresh_members(taken, touched)

    def _sync(self, batch: int, final: bool) -> tuple[list[RankedPod], TieGroup | None]:
        """Delete `batch` pods; the group tied with the cut is ordered exactly."""
        taken = [self._pop() for _ in range(batch)]
        group = None
        after = self._pop()
        if after is not None:
            k15 = taken[-1].key >> self.shift
            if after.key >> self.shift != k15:
                self._push(after)
            else:
                start = batch - 1
                while start > 0 and taken[start - 1].key >> self.shift == k15:
                    start -= 1
                members = [*taken[start:], after]
                while (pod := self._pop()) is not None:
                    if pod.key >> self.shift != k15:
                        self._push(pod)
                        break
                    members.append(pod)
                exact = _sort_group_exactly(members, self.keys.now_ns)
                group = TieGroup(members=exact, removed=batch - start)
                taken[start:] = exact[:group.removed]
                if not final:
                    for pod in exact[group.removed:]:
                        self._push(pod)
        for pod in taken:
            pod.sync = _GONE
        return taken, group

    def _pop(self) -> RankedPod | None:
        """The pod with the smallest current key, taken out of the heap."""
        heap, owner, epoch = self.heap, self.owner, self.node_epoch
        while heap:
            key = heapq.heappop(heap)
            pod = owner[key]
            if pod.live != key:
                continue  # a stale entry: the pod was re-keyed or taken
            pod.live = None
            node = pod.facts.node_name
            if pod.sync != epoch[node]:  # its rank fell since it was keyed
                pod.sync = epoch[node]
                pod.rank = self.per_node[node]
                self.keys.assign((pod,))
                self._push(pod)
                continue
            return pod
        return None

    def _push(self, pod: RankedPod) -> None:
        self.owner[pod.key] = pod
        pod.live = pod.key
        heapq.heappush(self.heap, pod.key)

    def _refresh_members(self, taken: list[RankedPod], touched: set[str]) -> None:
        """Re-key the class members whose class may have changed in the last sync.

        A class (see `_Keys`) is the pods of one rules 1-5 group ready at one instant; it
        changes when a member is deleted or a member's rank changes. Only the members
        ready at such an instant are re-keyed, so a sync costs what it changed.
        """
        if not self.members_at:
            return
        instants = {pod.facts.ready_time_ns for pod in taken}
        for node in touched:
            instants.update(p.facts.ready_time_ns for p in self.members_on.get(node, ()))
        epoch, per_node = self.node_epoch, self.per_node
        for instant in instants:
            members = [p for p in self.members_at.get(instant, ()) if p.sync != _GONE]
            if not members:
                continue
            for pod in members:
                node = pod.facts.node_name
                pod.sync = epoch[node]
                pod.rank = per_node[node]
            self.keys.assign(members)
            self.keys.assign_classes(members)
            for pod in members:
                if pod.live is not None and pod.live != pod.key:
                    self._push(pod)

    def _rest(self) -> list[RankedPod]:
        """The pods still in the heap, keyed as of this sync and sorted."""
        rest = [pod for pod in self.pods if pod.live is not None]
        epoch, per_node = self.node_epoch, self.per_node
        stale = [pod for pod in rest if pod.sync != epoch[pod.facts.node_name]]
        for pod in stale:
            pod.rank = per_node[pod.facts.node_name]
        self.keys.assign(stale)
        return sorted(rest, key=_KEY)


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
