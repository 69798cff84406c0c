"""A ReplicaSet's scale-down sync by sync: which pods the controller deletes.

Source: pkg/controller/replicaset/replica_set.go (`manageReplicas`, `getPodsToDelete`,
`BurstReplicas`). Each sync deletes at most BurstReplicas pods, the first ones in the
order of `active_pods_with_ranks`; a deleted pod is no longer active, so the next sync
ranks what is left with lower counts on the nodes that lost pods. Orders come from
`sort_keys`; the pods tied with a cut are reported, and over several syncs
`chain_bound` widens them to every chain of syncs.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from typing import Any

from ..model.burst_replicas import BURST_REPLICAS
from ..model.ranked_pod import RankedPod
from ..model.tie_group import TieGroup, possible_victims
from ..objects.podfacts import PodFacts, rank_field
from .active_pods_with_ranks import RelatedPods, facts_of
from .chain_bound import ChainBound
from .sort_keys import SortKeys, cut_tie_group, sort_group_exactly

GONE = -1  # RankedPod.sync of a pod a simulated sync has deleted
_RANK_MAX = (1 << 32) - 1
_KEY = attrgetter("key")
_FACTS = attrgetter("facts")
_NODE = attrgetter("node_name")
_ACTIVE = attrgetter("active")


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
    counted = RelatedPods(related_active)
    remaining = list(map(RankedPod, filter(_ACTIVE, pods)))  # ranks: set when keyed
    keys = SortKeys(remaining, now_ns)
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


def _deletions_by_sorting(keys: SortKeys, remaining: list[RankedPod], per_node: Counter[str],
                          counted: RelatedPods, diff: int, burst: int) -> Deletion:
    """The controller's syncs as written: sort what is left, cut, re-rank, again."""
    victims: list[RankedPod] = []
    groups: list[TieGroup] = []
    ordered = sorted(remaining, key=_KEY)
    while True:
        batch = min(diff, burst)
        if batch <= 0:
            return Deletion(order=victims + ordered, victims=victims, tie_groups=groups)
        # getPodsToDelete sorts only when some pods survive the batch.
        group = (cut_tie_group(ordered, batch, keys.now_ns, keys.shift)
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


def _discount(gone: Iterable[RankedPod], per_node: Counter[str],
              counted: RelatedPods) -> set[str]:
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
    Keys follow `SortKeys` exactly: ranks as of the sync, classes recomputed among the
    level's pods (a class never spans levels: its pods share rules 1-5).
    """

    def __init__(self, keys: SortKeys, pods: list[RankedPod], per_node: Counter[str],
                 counted: RelatedPods, burst: int) -> None:
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
        """The rules 1-5 key of a level (what `SortKeys.k15` gives its pods)."""
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
            exact = sort_group_exactly(pods, self.keys.now_ns)
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
                    if pod.sync != GONE and pod.facts.node_name in nodes]
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
            pod.sync = GONE
            facts = pod.facts
            node = facts.node_name
            places.add((facts.rules_1_to_4, node))
            if id(facts) in related or counted.has(facts):
                lost[node] = lost.get(node, 0) + 1
        on_node = self.on_node
        for place in places:
            left = [pod for pod in on_node[place] if pod.sync != GONE]
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
