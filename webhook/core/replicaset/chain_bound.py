"""Which pods any chain of ReplicaSet syncs can delete, for a scale-down along one order.

A scale-down larger than one sync (BurstReplicas, pkg/controller/replicaset/
replica_set.go) is deleted over several syncs, each re-ranking what is left. When an
earlier sync cut a rules 1-5 tie group, which of its pods went is unknowable, and it
changes the ranks the later syncs see. `ChainBound` bounds, from one deletion order,
the pods some chain can delete, so the verdict can judge the worst case.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from operator import attrgetter

from ..model.ranked_pod import RankedPod
from ..model.tie_group import TieGroup
from .active_pods_with_ranks import RelatedPods

_FACTS = attrgetter("facts")
_RULES_1_TO_4 = attrgetter("rules_1_to_4")


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
                 counted: RelatedPods) -> None:
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
