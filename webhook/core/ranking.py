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
from itertools import compress
from operator import attrgetter
from typing import Any

from .kube import status_of
from .podfacts import (
    CLOCK_WITHIN_BITS,
    COUNT_TOP,
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

    __slots__ = ("_buckets", "facts", "key", "less", "live", "rank", "replica_set", "sync")

    def __init__(self, facts: PodFacts, rank: int = 0) -> None:
        # Set here: the facts and the rank. Set before they are read: `key` (rules 1-8 as
        # an integer, see podfacts) when sorted, `replica_set` (the owning ReplicaSet) by
        # the prediction; unset ones read as their defaults (__getattr__).
        self.facts = facts
        self.rank = rank
        self.sync = 0  # _GONE once deleted by a simulated sync
        self.less: _Less | None = None  # its stand-in in a comparator sort (this clock)

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
_RESTARTS = attrgetter("restarts")
_SIDECAR_RESTARTS = attrgetter("sidecar_restarts")
_REST_OF_RULES = attrgetter("restarts", "sidecar_restarts", "created_ns")
_NODE = attrgetter("node_name")
_ACTIVE = attrgetter("active")
_READY = attrgetter("ready")
_REF = attrgetter("ref")
_RULES_1_TO_4 = attrgetter("rules_1_to_4")


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
        if now_ns is not None:  # (C-speed passes: this runs on every pod)
            # A not-ready pod has no ready time (None), nor has a ready pod without one.
            times = list(map(_READY_TIME, facts))
            count = Counter(times)
            if len(count) < len(times):
                shared = set(compress(count.keys(), map((1).__lt__, count.values())))
                if None in shared:  # ready pods without a time share "no time"
                    ready_untimed = sum(f.ready for f in facts if f.ready_time_ns is None)
                    if ready_untimed < 2:
                        shared.discard(None)
                flags = map(shared.__contains__, times)
                self.class_members = [pod for pod in compress(pods, flags) if pod.facts.ready]

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

    Without a clock, rules 6-8 are lexicographic and the key is exact (distinct encoded
    UIDs). With one they are not a strict weak order (pods ready at the same instant
    fall through to restarts while the others go by UID), so Python's sort with the
    comparator is what defines the order; it is run (through `_Less`) unless its first
    pass would find the key order already sorted (`_already_sorted`). (An earlier proof
    that skipped it on "clean" groups disagreed with it on some states.)
    """
    if now_ns is None:
        facts = list(map(_FACTS, group))
        if len(set(map(_UID, facts))) == len(facts) and min(map(_UID_KEY, facts)) >= 0:
            return group
    elif _already_sorted(group, now_ns):
        return group
    return _compare_sort(group, now_ns)


def _already_sorted(group: list[RankedPod], now_ns: int) -> bool:
    """No two neighbours of `group` (tied on rules 1-5, in key order, with a clock) are
    out of order for the comparator: its sort's first pass then finds one run and
    leaves the list as it is.

    Which neighbours can be: in a ready group the key orders by ready head (present bit,
    bucket), then class UID, ready time and rules 7-8 with the UID last. Different heads
    are the comparator's order; equal heads and different ready times go by UID, which
    the class UID is, except for pods sharing their ready instant with another pod of
    the group; pods of one instant follow rules 7-8 as the key does. So only neighbours
    of such pods are asked, through the comparator. A not-ready group is ordered by
    rules 7-8 and the UID, as the key does, as long as restart counts fit the key.
    """
    facts = list(map(_FACTS, group))
    if not facts[0].ready:  # a group is all ready or all not ready
        counts = [*map(_RESTARTS, facts), *map(_SIDECAR_RESTARTS, facts)]
        return min(counts) >= -COUNT_TOP and max(counts) <= COUNT_TOP
    times = list(map(_READY_TIME, facts))
    count = Counter(times)
    if len(count) == len(times):
        return True
    shared = set(compress(count.keys(), map((1).__lt__, count.values())))
    last, asked = len(group) - 1, -1  # pair i: the neighbours group[i], group[i + 1]
    for index in compress(range(len(group)), map(shared.__contains__, times)):
        for i in (index - 1, index):  # in increasing order, each pair once
            if asked < i < last:
                asked = i
                before, after = group[i], group[i + 1]
                if (after.less or _Less(after, now_ns)) < (before.less
                                                           or _Less(before, now_ns)):
                    return False
    return True


def _compare_sort(group: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """Rules 6-8 applied pair by pair (Python's sort calling the comparator).

    With a clock each pod stands in the sort as its `_Less`, whose `<` answers what the
    comparator answers (`compare(a, b) < 0`, all the sort asks) from fields read once per
    pod and prediction: the same answers to the same questions, so the same order, at a
    fraction of the cost. Without a clock the comparator itself is called.
    """
    if now_ns is None:
        return _compare_sort_slowly(group, now_ns)
    stand_ins = []
    for index, pod in enumerate(group):
        less = pod.less or _Less(pod, now_ns)
        less.index = index
        stand_ins.append(less)
    return list(map(group.__getitem__, map(_INDEX, sorted(stand_ins))))


class _Less:
    """A pod of a rules 1-5 tie group whose `<` is the comparator's rules 6-8 (with a clock).

    - ready times differ (ready group): rule 6, `by_time` = (ready present and bucket, UID);
    - else rules 7-8 up to the creation bucket: `tail` = (-restarts, -sidecar restarts,
      created present and bucket);
    - else different creation times go in UID order, equal ones tie (neither is less).
    A not-ready group has no ready time (None for all): rule 6 never decides there.
    The pod keeps it (`RankedPod.less`) for the rest of the prediction (one clock); it
    points back only by its `index` in the list being sorted (no reference cycle).
    """

    __slots__ = ("by_time", "created", "index", "ready_time", "tail", "uid")

    def __init__(self, pod: RankedPod, now_ns: int) -> None:
        facts = pod.facts
        self.ready_time = facts.ready_time_ns
        self.uid = facts.uid
        self.by_time, self.tail = facts.comparator_fields(now_ns)
        self.created = facts.created_ns
        pod.less = self

    def __lt__(self, other: _Less) -> bool:
        if self.ready_time != other.ready_time:
            return self.by_time < other.by_time
        if self.tail != other.tail:
            return self.tail < other.tail
        return self.created != other.created and self.uid < other.uid


_INDEX = attrgetter("index")


def _compare_sort_slowly(group: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """`_compare_sort` with the comparator itself, buckets read once."""
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
    # A sync before the last one cut a tie group: which of its pods went decides which
    # nodes lose a pod, and so the later syncs' victims. `tie_groups` then covers every
    # chain of syncs (`ChainBound`), and `sync_tie_groups` keeps the groups each sync
    # of the predicted chain cut (the same list otherwise).
    chained: bool = False
    sync_tie_groups: list[TieGroup] = field(default_factory=list)
    chain_bound: ChainBound | None = None  # for smaller scale-downs along `order`

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
        deletion = _SyncLevels(keys, remaining, Counter(per_node), counted, burst).run(diff)
    else:
        for pod in remaining:
            pod.rank = per_node[pod.facts.node_name]
        keys.assign(remaining)
        if keys.class_members:
            keys.assign_classes(keys.class_members)
        deletion = _deletions_by_sorting(keys, remaining, Counter(per_node), counted, diff,
                                         burst)
    deletion.sync_tie_groups = deletion.tie_groups
    deletion.chain_bound = ChainBound(deletion.order, per_node, counted)
    if deletion.chained:
        group = deletion.chain_bound.group(len(deletion.victims), deletion.victims)
        deletion.tie_groups = [group] if group is not None else []
    return deletion


class ChainBound:
    """The pods some chain of syncs can delete, for any count of deletions along one
    deletion order of a ReplicaSet (`Deletion.order`, which is in rules 1-4 order).

    Rules 1-4 are each pod's own, so every sync takes what is left of an earlier rules
    1-4 group first: the groups wholly within the deletions go in every chain, and only
    the group G the last deletion falls in is in doubt. Inside G, rule 5 (more related
    pods on the node first) decides, and ranks only fall. Let L be the rank of the last
    pod deleted, as its sync saw it. Every pod of G deleted before had at least rank L
    in its own sync (it went first, and the last one was there too, its rank only
    falling since), so it runs on a node whose rank before the scale-down, r(n), is at
    least L. And each of G's survivors was behind the last one in the last sync, on a
    node then counting its fixed pods f(n) (related pods that do not go) and its
    surviving pods of G: at most L. So G's survivors number at most the sum over n of
    min(g(n), L - f(n)), which bounds L from below by L0, and no chain deletes a pod of
    G on a node with r(n) < L0.
    """

    def __init__(self, order: list[RankedPod], per_node: Counter[str],
                 counted: _Counted) -> None:
        """`order`: a deletion order; `per_node`: related active pods per node before the
        scale-down; `counted`: the related pods (only they make a rank)."""
        self.order, self.per_node, self.counted = order, per_node, counted
        self._starts: list[int] | None = None  # where each rules 1-4 group begins
        self._rooms: dict[int, list[int]] = {}  # per group start, see `_room`
        # Per position of the order: the node of a related pod, None for one that is not
        # (deleting it changes no rank). Read once, then counted over slices at C speed.
        self._counted_nodes: list[str | None] | None = None

    def group(self, removed: int, victims: Sequence[RankedPod] = ()) -> TieGroup | None:
        """The doubtful pods when the first `removed` of the order go (None: no doubt);
        `victims`, the predicted ones, are kept in it whatever the bound says."""
        cut = self.cut(removed)
        if cut is None:
            return None
        start, end, lowest = cut
        per_node, victim_ids = self.per_node, set(map(id, victims))
        possible = [p for p in self.order[start:end]
                    if per_node[p.facts.node_name] >= lowest or id(p) in victim_ids]
        share = removed - start
        return TieGroup(members=possible, removed=share) if share < len(possible) else None

    def cut(self, removed: int) -> tuple[int, int, int] | None:
        """(start, end, L0) when the first `removed` of the order go: the pods in doubt are
        those of order[start:end] on nodes whose rank before the scale-down is at least
        L0 (`per_node`); None when every chain deletes the same pods."""
        if removed <= 0 or removed >= len(self.order):
            return None
        starts = self._starts
        if starts is None:
            keys = list(map(_RULES_1_TO_4, map(_FACTS, self.order)))
            starts = self._starts = [0] + [i for i in range(1, len(keys))
                                           if keys[i] != keys[i - 1]]
        index = bisect_right(starts, removed - 1) - 1
        start = starts[index]
        end = starts[index + 1] if index + 1 < len(starts) else len(self.order)
        if removed == end:
            return None  # the deletions end with a whole group: every chain agrees
        return start, end, self._lowest_last_rank(start, end, end - removed)

    def _lowest_last_rank(self, start: int, end: int, survivors: int) -> int:
        """L0: the lowest rank the last deletion can have with `survivors` of the group
        [start, end) of the order left: the smallest level with room for them all."""
        return bisect_left(self._room(start, end), survivors)

    def _room(self, start: int, end: int) -> list[int]:
        """Per level L: how many of the group's pods can survive if the last deletion is
        at rank L, sum over n of min(g(n), max(0, L - f(n))) plus the uncounted pods
        (deleting one changes no rank, so it may survive anywhere). Non-decreasing."""
        known = self._rooms.get(start)
        if known is not None:
            return known
        nodes = self._counted_nodes
        if nodes is None:
            has, ids = self.counted.has, self.counted.ids
            nodes = self._counted_nodes = [f.node_name if id(f) in ids or has(f) else None
                                           for f in map(_FACTS, self.order)]
        in_group = Counter(nodes[start:end])
        uncounted = in_group.pop(None, 0)
        deleted_before = Counter(nodes[:start])
        per_node = self.per_node
        # f(n): related pods on n that neither went before the group nor are in it.
        fixed = {node: max(0, per_node[node] - deleted_before[node] - count)
                 for node, count in in_group.items()}
        top = max((fixed[node] + count for node, count in in_group.items()), default=0)
        # Each node adds 1 per level from f(n) to f(n) + g(n): a difference array.
        growing = [0] * (top + 2)
        for node, count in in_group.items():
            growing[fixed[node]] += 1
            growing[fixed[node] + count] -= 1
        room, total, slope = [], uncounted, 0
        for level in range(top + 1):
            room.append(total)
            slope += growing[level]
            total += slope
        self._rooms[start] = room
        return room


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
            return Deletion(order=victims + remaining, victims=victims, tie_groups=groups,
                            chained=bool(groups) and (group is None or len(groups) > 1))
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
        # Every pod is keyed here once, without the rank field: every pod of a level has
        # the same, and levels are taken in rules 1-5 order, so the rest of the key
        # orders a level alone; only class fields change later (`_pods_at`).
        on_node: defaultdict[tuple[int, str], list[RankedPod]] = defaultdict(list)
        now_ns, uid_keys = keys.now_ns, keys.uid_keys
        if uid_keys is None and now_ns is not None:
            for pod in pods:  # the hot loop: the facts' memo inlined (see PodFacts.base_key)
                facts = pod.facts
                memo = facts.memo
                pod.key = (memo[2] if memo is not None and memo[0] <= now_ns < memo[1]
                           else facts.base_key(now_ns))
                on_node[(facts.rules_1_to_4, facts.node_name)].append(pod)
        else:
            for pod in pods:
                facts = pod.facts
                pod.key = facts.base_key(now_ns, None if uid_keys is None
                                         else uid_keys[facts.uid])
                on_node[(facts.rules_1_to_4, facts.node_name)].append(pod)
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
        # level -> (its pods in key order, its nodes) when last looked at (`_pods_at`)
        self.levels: dict[int, tuple[list[RankedPod], set[str]]] = {}

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
                                victims=victims, tie_groups=groups,
                                chained=bool(groups) and (group is None or len(groups) > 1))
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
        """The pods of a level, with its rank and in key order.

        A level looked at before (the one a cut split, above all: it is taken over
        several syncs) is carried over: its pods still there keep their place (rules 6-8
        and the rank do not change while a node keeps its rank), the pods of nodes that
        came down to its rank since join, and the sort by key finds the old order as one
        run. Only the class fields are worked out again: they depend on which pods are
        in the level.
        """
        group, rank = level >> 32, _RANK_MAX - (level & _RANK_MAX)
        nodes = self.nodes_at.get(group, {}).get(rank)
        if not nodes:
            return []
        on_node = self.on_node
        before = self.levels.get(level)
        if before is None:
            pods = []
            for node in nodes:
                for pod in on_node[(group, node)]:
                    pod.rank = rank
                    pods.append(pod)
        else:
            # Ranks only fall, so a node here before and now was here all along.
            pods_before, nodes_before = before
            pods = [pod for pod in pods_before
                    if pod.sync != _GONE and pod.facts.node_name in nodes]
            for node in nodes - nodes_before:
                for pod in on_node[(group, node)]:
                    pod.rank = rank
                    pods.append(pod)
        if self.class_ids:
            members = list(compress(pods, map(self.class_ids.__contains__, map(id, pods))))
            if members:
                self.keys.assign_classes(members)
        pods.sort(key=_KEY)
        self.levels[level] = (pods, set(nodes))  # never changed in place: copied above
        return pods

    def _delete(self, taken: list[RankedPod]) -> None:
        """Take the deleted pods out, then move their nodes to their lower ranks."""
        per_node, counted = self.per_node, self.counted
        related = counted.ids
        places = set()
        lost: dict[str, int] = {}  # node -> deleted pods that counted towards its rank
        for pod in taken:  # one pass; what `_discount` counts
            pod.sync = _GONE
            facts = pod.facts
            node = facts.node_name
            places.add((facts.rules_1_to_4, node))
            if id(facts) in related or counted.has(facts):
                lost[node] = lost.get(node, 0) + 1
        on_node = self.on_node
        for place in places:
            left = [pod for pod in on_node[place] if pod.sync != _GONE]
            if left:
                on_node[place] = left
                continue
            del on_node[place]
            group, node = place
            self.groups_on[node].discard(group)
            self._forget(group, per_node[node], node)
        for node, count in lost.items():
            old = per_node[node]
            new = per_node[node] = old - count
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
