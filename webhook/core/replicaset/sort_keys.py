"""The ReplicaSet controller's deletion order as integer sort keys.

`active_pods_with_ranks.compare_pods` is the specification; sorting hundreds of
thousands of pods through it pair by pair is too slow for an admission answer, so each
pod gets one integer key (see `podfacts` for the encoding) and Python sorts those.
Rules 1-5 are exact in the key. Rules 6-8 are exact without a clock; with one they
are not a strict weak order, so wherever the order matters (the group the cut splits)
the pods are sorted again with the comparator's answers (`sort_group_exactly`). The
property tests pin every order here to the comparator's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import cmp_to_key
from itertools import compress
from operator import attrgetter
from typing import Any

from ..model.ranked_pod import RankedPod, log_bucket
from ..model.tie_group import TieGroup
from ..objects.podfacts import (
    CLOCK_WITHIN_BITS,
    COUNT_TOP,
    NO_CLOCK_WITHIN_BITS,
    PodFacts,
    rank_field,
    uid_order_keys,
)
from .active_pods_with_ranks import compare_times, facts_of

_KEY = attrgetter("key")
_FACTS = attrgetter("facts")
_UID = attrgetter("uid")
_UID_KEY = attrgetter("uid_key")
_READY_TIME = attrgetter("ready_time_ns")
_RESTARTS = attrgetter("restarts")
_SIDECAR_RESTARTS = attrgetter("sidecar_restarts")
_INDEX = attrgetter("index")


class SortKeys:
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
    """Deletion order: rules 1-5 exactly, rules 6-8 through the key of `SortKeys`."""
    keys = SortKeys(ranked, now_ns)
    keys.assign(ranked)
    if keys.class_members:
        keys.assign_classes(keys.class_members)
    return sorted(ranked, key=_KEY)


def rank_pods(
    pods: Sequence[Mapping[str, Any] | PodFacts],
    related_pods: Iterable[Mapping[str, Any] | PodFacts],
    now_ns: int | None,
) -> list[RankedPod]:
    """Pods in the order the ReplicaSet controller deletes them (best prediction)."""
    per_node = Counter(f.node_name for f in facts_of(related_pods) if f.active)
    ranked = [RankedPod(f, per_node[f.node_name]) for f in facts_of(pods)]
    return sort_ranked(ranked, now_ns)


def sort_group_exactly(group: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """Pods tied on rules 1-5, given in key order, as Python's sort with the comparator
    (`compare_pods`, as Go's sort.Sort calls it) orders them.

    Without a clock, rules 6-8 are lexicographic and the key is exact (distinct encoded
    UIDs). With one they are not a strict weak order (pods ready at the same instant
    fall through to restarts while the others go by UID), so Python's sort with the
    comparator is what defines the order; it is run (through `Less`) unless its first
    pass would find the key order already sorted (`_already_sorted`). No weaker test
    of "already in order" is used: only the sort's own first pass is known to agree
    with the sort on every state.
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
                if (after.less or Less(after, now_ns)) < (before.less
                                                           or Less(before, now_ns)):
                    return False
    return True


def _compare_sort(group: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """Rules 6-8 applied pair by pair (Python's sort calling the comparator).

    With a clock each pod stands in the sort as its `Less`, whose `<` answers what the
    comparator answers (`compare(a, b) < 0`, all the sort asks) from fields read once per
    pod and prediction: the same answers to the same questions, so the same order, at a
    fraction of the cost. Without a clock the comparator itself is called.
    """
    if now_ns is None:
        return _compare_sort_slowly(group, now_ns)
    stand_ins = []
    for index, pod in enumerate(group):
        less = pod.less or Less(pod, now_ns)
        less.index = index
        stand_ins.append(less)
    return list(map(group.__getitem__, map(_INDEX, sorted(stand_ins))))


class Less:
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

    def __lt__(self, other: Less) -> bool:
        if self.ready_time != other.ready_time:
            return self.by_time < other.by_time
        if self.tail != other.tail:
            return self.tail < other.tail
        return self.created != other.created and self.uid < other.uid


def _compare_sort_slowly(group: list[RankedPod], now_ns: int | None) -> list[RankedPod]:
    """`_compare_sort` with the comparator itself, buckets read once."""
    buckets = {id(p): (log_bucket(p.facts.ready_time_ns, now_ns),
                       log_bucket(p.facts.created_ns, now_ns)) for p in group}

    def compare(a: RankedPod, b: RankedPod) -> int:
        fa, fb = a.facts, b.facts
        if fa.ready and fa.ready_time_ns != fb.ready_time_ns:  # a group is all ready or not
            return compare_times(fa.ready_time_ns, fb.ready_time_ns, buckets[id(a)][0],
                                  buckets[id(b)][0], now_ns, fa.uid, fb.uid)
        if fa.restarts != fb.restarts:
            return -1 if fa.restarts > fb.restarts else 1
        if fa.sidecar_restarts != fb.sidecar_restarts:
            return -1 if fa.sidecar_restarts > fb.sidecar_restarts else 1
        if fa.created_ns != fb.created_ns:
            return compare_times(fa.created_ns, fb.created_ns, buckets[id(a)][1],
                                  buckets[id(b)][1], now_ns, fa.uid, fb.uid)
        return 0
    return sorted(group, key=cmp_to_key(compare))


def cut_tie_group(ordered: list[RankedPod], cut: int, now_ns: int | None,
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
    ordered[start:end] = sort_group_exactly(ordered[start:end], now_ns)
    return TieGroup(members=ordered[start:end], removed=cut - start)
