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
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cmp_to_key
from itertools import compress, pairwise
from operator import attrgetter
from typing import Any

from .kube import status_of
from .podfacts import (
    CLOCK_WITHIN_BITS,
    NO_CLOCK_WITHIN_BITS,
    READY_HEAD_SHIFT,
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

    def __init__(self, facts: PodFacts, rank: int = 0) -> None:
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
_ACTIVE = attrgetter("active")
_READY = attrgetter("ready")
_RULES_1_TO_4 = attrgetter("rules_1_to_4")
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
            ready = list(map(_READY, facts))
            times = list(compress(map(_READY_TIME, facts), ready))
            if len(set(times)) < len(times):
                shared = {t for t, n in Counter(times).items() if n > 1}
                self.class_members = [p for p, f in zip(compress(pods, ready),
                                                        compress(facts, ready), strict=True)
                                      if f.ready_time_ns in shared]

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

    The comparator runs only where no proof says what it would give. Without a clock,
    rules 6-8 are lexicographic and the key is exact. With one, rule 6 (or rule 8) is
    a strict order except among pods sharing an instant (see `_proven_order`); where a
    proof covers the whole group the order comes from one sort by integer key, the same
    order the comparator gives (it is then a strict weak order that agrees with it).
    """
    facts = list(map(_FACTS, group))
    if len(set(map(_UID, facts))) == len(facts) and min(map(_UID_KEY, facts)) >= 0:
        if now_ns is None:
            return group
        proven = _proven_order(group, facts, now_ns)
        if proven is not None:
            return proven
    return _compare_sort(group, now_ns)


def _proven_order(group: list[RankedPod], facts: list[PodFacts],
                  now_ns: int) -> list[RankedPod] | None:
    """The comparator's order of a tie group with a clock, where it is provably a strict
    weak order; None otherwise. UIDs are distinct and encoded (`uid_key` >= 0).

    Ready pods (a group is all ready or all not ready): rule 6 compares different ready
    times by bucket, then UID; pods ready at the same instant fall through to rules 7
    and 8 (`_same_instant_clean`). Per bucket, each instant shared by several pods is
    either
    - in UID order by rules 7-8 too (every pair): the bucket is then in plain UID order
      there, whatever lies between; or
    - contiguous in UID order among the bucket's pods: it sorts as one block at its
      smallest UID, by rules 7-8 inside (what the key's class field encodes).
    Any other instant may make the comparator cyclic, and the caller compares instead.
    Not-ready pods: rules 7-8 only (`_same_instant_clean` on the whole group).
    """
    if not facts[0].ready:
        return group if _same_instant_clean(facts, now_ns) else None
    times = list(map(_READY_TIME, facts))
    if len(set(times)) == len(times):
        return group
    at: dict[int | None, list[int]] = defaultdict(list)
    for index, time in enumerate(times):
        at[time].append(index)
    # The ready present bit and bucket, as the keys carry them (pods share rules 1-5).
    mask = (1 << CLOCK_WITHIN_BITS) - 1
    heads = [(pod.key & mask) >> READY_HEAD_SHIFT for pod in group]
    bucket_uids: dict[int, list[int]] = defaultdict(list)
    for head, uid_key in zip(heads, map(_UID_KEY, facts), strict=True):
        bucket_uids[head].append(uid_key)
    for uids in bucket_uids.values():
        uids.sort()
    own_uid: list[int] = []  # pods whose class field must be their own UID
    for indexes in at.values():
        if len(indexes) < 2:
            continue
        members = sorted((facts[i] for i in indexes), key=_UID_KEY)
        if _in_uid_order(members, now_ns):
            own_uid.extend(i for i in indexes)
            continue
        uids = bucket_uids[heads[indexes[0]]]
        span = bisect_right(uids, members[-1].uid_key) - bisect_left(uids, members[0].uid_key)
        if span != len(members) or not _same_instant_clean(members, now_ns):
            return None
    if not own_uid:
        return group
    keys = [pod.key & mask for pod in group]
    for i in own_uid:
        keys[i] = facts[i].with_class_uid(keys[i], facts[i].uid_key)
    order = sorted(range(len(group)), key=keys.__getitem__)
    return [group[i] for i in order]


def _rules_7_8_head(facts: PodFacts, now_ns: int) -> tuple[int, int, bool, int]:
    """Rules 7-8 up to the creation bucket: what decides before a UID could."""
    return (-facts.restarts, -facts.sidecar_restarts, facts.created_ns is not None,
            log_bucket(facts.created_ns, now_ns))


def _in_uid_order(members: list[PodFacts], now_ns: int) -> bool:
    """Rules 7-8 put every pair of `members` (sorted by UID) in UID order, strictly."""
    heads = [_rules_7_8_head(f, now_ns) for f in members]
    if any(a > b for a, b in pairwise(heads)):
        return False
    # Equal heads fall to the creation time: the UID decides only if the times differ.
    runs: dict[tuple[int, int, bool, int], list[int | None]] = defaultdict(list)
    for head, f in zip(heads, members, strict=True):
        runs[head].append(f.created_ns)
    return all(len(set(created)) == len(created) for created in runs.values())


def _same_instant_clean(members: list[PodFacts], now_ns: int) -> bool:
    """Rules 7-8 are a strict weak order on `members` that the key's tail encodes.

    They compare restarts, sidecar restarts, then creation times: zero first, bucket,
    UID, but equal times tie. Within each (restarts, sidecar restarts, bucket) the
    creation times must be all different (UID order, as the key) or all equal (ties,
    which the stable sort keeps in key order).
    """
    runs: dict[tuple[int, int, bool, int], list[int | None]] = defaultdict(list)
    for f in members:
        runs[_rules_7_8_head(f, now_ns)].append(f.created_ns)
    return all(len(set(created)) in (1, len(created)) for created in runs.values())


def _compare_sort(group: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """Rules 6-8 applied pair by pair (Python's sort calling the comparator), buckets
    read once."""
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
    remaining = list(map(RankedPod, filter(_ACTIVE, pods)))  # ranks: set when keyed
    keys = _Keys(remaining, now_ns)
    diff = len(remaining) - max(replicas, 0)
    if diff > burst and keys.distinct_uids():
        return _SyncLevels(keys, remaining, per_node, counted, burst).run(diff)
    for pod in remaining:
        pod.rank = per_node[pod.facts.node_name]
    keys.assign(remaining)
    if keys.class_members:
        keys.assign_classes(keys.class_members)
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
    ids = counted.ids
    for facts in map(_FACTS, gone):
        if id(facts) in ids or counted.has(facts):
            node = facts.node_name
            per_node[node] -= 1
            touched.add(node)
    return touched


class _SyncLevels:
    """The controller's syncs by levels of rules 1-5 instead of a sort of everything.

    Same result as `_deletions_by_sorting` when keys are unique (distinct UIDs). Rules 1-4
    are a pod's own and rule 5 is its node's rank, so the pods tied on rules 1-5 (a
    "level") are the pods of one rules 1-4 group on the nodes of one rank. Nodes are kept
    by group and rank and move when a deletion lowers their rank; a sync takes whole
    levels in order and sorts (by the full key) only the levels it takes and the one the
    cut splits, so a sync costs about its batch and its tie group, not the whole set.
    Keys follow `_Keys` exactly: ranks as of the sync, classes recomputed among the
    level's pods (a class never spans levels: its pods share rules 1-5).
    """

    def __init__(self, keys: _Keys, pods: list[RankedPod], per_node: Counter[str],
                 counted: _Counted, burst: int) -> None:
        self.keys, self.per_node, self.counted, self.burst = keys, per_node, counted, burst
        self.shift = keys.shift
        self.class_ids = set(map(id, keys.class_members))
        # (rules 1-4, node) -> the pods left there; group -> rank -> nodes with such pods
        on_node: defaultdict[tuple[int, str], list[RankedPod]] = defaultdict(list)
        facts = list(map(_FACTS, pods))
        places = zip(map(_RULES_1_TO_4, facts), map(_NODE, facts), strict=True)
        for place, pod in zip(places, pods, strict=True):
            on_node[place].append(pod)
        self.on_node: dict[tuple[int, str], list[RankedPod]] = dict(on_node)
        self.nodes_at: dict[int, dict[int, set[str]]] = {}
        self.groups_on: dict[str, set[int]] = {}
        for group, node in self.on_node:
            self.groups_on.setdefault(node, set()).add(group)
            self.nodes_at.setdefault(group, {}).setdefault(per_node[node], set()).add(node)
        # Levels to look at, in order; each at most once (`queued`), some may be empty.
        self.queue = [self._level(group, rank) for group, ranks in self.nodes_at.items()
                      for rank in ranks]
        self.queued = set(self.queue)
        heapq.heapify(self.queue)
        self.consumed: list[int] = []  # the levels the last sync took from

    def _level(self, group: int, rank: int) -> int:
        """The rules 1-5 key of a level (what `_Keys.k15` gives its pods)."""
        return group << 32 | rank_field(rank)

    def run(self, diff: int) -> Deletion:
        victims: list[RankedPod] = []
        groups: list[TieGroup] = []
        while True:
            batch = min(diff, self.burst)
            diff -= batch
            final = diff <= 0
            taken, group = self._sync(batch)
            victims.extend(taken)
            if group is not None:
                groups.append(group)
            if final:
                survivors = group.members[group.removed:] if group else []
                return Deletion(order=victims + survivors + self._rest(),
                                victims=victims, tie_groups=groups)
            self._delete(taken)

    def _sync(self, batch: int) -> tuple[list[RankedPod], TieGroup | None]:
        """The `batch` first pods; the level the cut splits is ordered exactly."""
        taken: list[RankedPod] = []
        self.consumed = []
        while len(taken) < batch and self.queue:
            level = heapq.heappop(self.queue)
            self.queued.discard(level)
            pods = self._pods_at(level)
            if not pods:
                continue
            self.consumed.append(level)
            if len(taken) + len(pods) <= batch:
                taken.extend(pods)
                continue
            self._enqueue(level)  # the rest of it comes first next time
            exact = _sort_group_exactly(pods, self.keys.now_ns)
            group = TieGroup(members=exact, removed=batch - len(taken))
            taken.extend(exact[:group.removed])
            return taken, group
        return taken, None

    def _pods_at(self, level: int) -> list[RankedPod]:
        """The pods of a level, keyed as of now and in key order."""
        group, rank = level >> 32, _RANK_MAX - (level & _RANK_MAX)
        nodes = self.nodes_at.get(group, {}).get(rank)
        if not nodes:
            return []
        on_node = self.on_node
        pods = [pod for node in nodes for pod in on_node[(group, node)]]
        keys, now_ns = self.keys, self.keys.now_ns
        # Keys without the rank field: every pod here has the same, and levels are taken
        # in rules 1-5 order, so the rest of the key orders the level alone.
        if keys.uid_keys is None and now_ns is not None:
            for pod in pods:  # the hot loop: the facts' memo inlined (see PodFacts.base_key)
                pod.rank = rank
                facts = pod.facts
                memo = facts.memo
                pod.key = (memo[2] if memo is not None and memo[0] <= now_ns < memo[1]
                           else facts.base_key(now_ns))
        else:
            uid_keys = keys.uid_keys
            for pod in pods:
                pod.rank = rank
                pod.key = pod.facts.base_key(
                    now_ns, None if uid_keys is None else uid_keys[pod.facts.uid])
        if self.class_ids:
            members = [pod for pod in pods if id(pod) in self.class_ids]
            if members:
                keys.assign_classes(members)
        pods.sort(key=_KEY)
        return pods

    def _delete(self, taken: list[RankedPod]) -> None:
        """Take the deleted pods out, then move their nodes to their lower ranks."""
        gone = set(map(id, taken))
        on_node = self.on_node
        for place in {(pod.facts.rules_1_to_4, pod.facts.node_name) for pod in taken}:
            left = [pod for pod in on_node[place] if id(pod) not in gone]
            if left:
                on_node[place] = left
                continue
            del on_node[place]
            group, node = place
            self.groups_on[node].discard(group)
            self._forget(group, self.per_node[node], node)
        before = {node: self.per_node[node] for node in map(_NODE, map(_FACTS, taken))}
        for node in _discount(taken, self.per_node, self.counted):
            old, new = before[node], self.per_node[node]
            for group in self.groups_on.get(node, ()):
                self._forget(group, old, node)
                ranks = self.nodes_at.setdefault(group, {})
                if new not in ranks:
                    ranks[new] = set()
                    self._enqueue(self._level(group, new))
                ranks[new].add(node)

    def _enqueue(self, level: int) -> None:
        if level not in self.queued:
            self.queued.add(level)
            heapq.heappush(self.queue, level)

    def _forget(self, group: int, rank: int, node: str) -> None:
        ranks = self.nodes_at[group]
        nodes = ranks.get(rank)
        if nodes is not None:
            nodes.discard(node)
            if not nodes:
                del ranks[rank]  # its queue entry finds nothing and is dropped

    def _rest(self) -> list[RankedPod]:
        """The pods the last sync left alone (beyond its tie group), keyed and sorted."""
        consumed = set(self.consumed)
        levels = sorted(self._level(group, rank) for group, ranks in self.nodes_at.items()
                        for rank in ranks)
        rest = []
        for level in levels:
            if level not in consumed:
                rest.extend(self._pods_at(level))
        return rest


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
