"""Which pods can go when several ReplicaSets of one Deployment shrink at once.

During a rollout the Deployment controller splits a scale-down between its active
ReplicaSets and updates them one after another; each ReplicaSet controller then syncs
on its own schedule. Every sync ranks its own pods with rule 5 counting the *active*
pods of the whole Deployment on each node (getPodsRankedByRelatedPodsOnSameNode), and
a pod a sibling has already deleted is no longer active. So the rank of a node, as a
given sync sees it, is anywhere between its count before the scale and that count
minus the sibling pods on it that have been deleted by then, which depends on timing.

The model is a sound over-approximation of every sync order:

* `possible[R]`: pods of ReplicaSet R that some order can delete. A node's rank, as R
  sees it, lies in [count - gone, count], where `gone` counts the pods on the node that
  other ReplicaSets (and R itself, when its scale-down takes several syncs) can delete.
  Nodes are independent, so the assignment that favours deleting pod p is: p's node at
  its full count, every other node at its lowest. p is possible when fewer than `k`
  pods (R's share of the scale-down) are strictly ahead of p on rules 1-5 there; pods
  tied with p on rules 1-5 may go either way (rules 6-8 are not predictable).
* `certain[R]`: pods deleted in every order: even with p's node at its lowest and every
  other node at its full count, fewer than `k` other pods are ahead of or tied with p.
* The `possible` sets feed each other (more possible victims, wider intervals), so
  they are grown from the single-state prediction to a fixpoint. Every pod actually
  deleted is chosen in a state whose already-deleted pods were, by induction, in the
  `possible` sets; so its ranks lie in the intervals and the pod is in the fixpoint.

Each ReplicaSet's uncertainty is returned as one tie group (possible but not certain
pods, of which `k - len(certain)` go) that the verdict judges on the worst case.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..model.burst_replicas import BURST_REPLICAS
from ..model.ranked_pod import RankedPod
from ..model.tie_group import TieGroup


@dataclass
class ShrinkingReplicaSet:
    """One ReplicaSet's share of the scale-down: its active pods and how many go."""

    name: str
    pods: list[RankedPod]  # active pods, in the predicted deletion order
    removed: int
    predicted_victims: list[RankedPod]


def sync_order_groups(shrinking: Sequence[ShrinkingReplicaSet], node_counts: Mapping[str, int],
                      burst: int = BURST_REPLICAS) -> dict[str, TieGroup | None]:
    """Per ReplicaSet, the tie group covering every sync order (None when the order is fixed).

    `node_counts` are the active pods of the whole Deployment per node name before the
    scale. The predicted victims must be one of the orders (they are: nothing deleted yet).
    """
    possible = {rs.name: {id(p) for p in rs.predicted_victims} for rs in shrinking}
    # Each round only grows finite sets, so this ends (real cases settle in two or three
    # rounds); stopping any earlier would not be a fixpoint, and not sound.
    while True:
        grown = {rs.name: _possible(rs, _gone_per_node(rs, shrinking, possible, burst),
                                    node_counts) | possible[rs.name] for rs in shrinking}
        if grown == possible:
            break
        possible = grown
    groups: dict[str, TieGroup | None] = {}
    for rs in shrinking:
        gone = _gone_per_node(rs, shrinking, possible, burst)
        # Over several syncs the cut moves between syncs and ranks with it: only whole
        # rules 1-4 groups before the cut are certain there.
        certain = (_certain(rs, gone, node_counts) if rs.removed <= burst
                   else _whole_groups_before_cut(rs))
        uncertain = [p for p in rs.pods if id(p) in possible[rs.name] and id(p) not in certain]
        removed = rs.removed - len(certain)
        groups[rs.name] = (TieGroup(members=uncertain, removed=removed)
                           if uncertain and 0 < removed < len(uncertain) else None)
    return groups


def _gone_per_node(rs: ShrinkingReplicaSet, shrinking: Sequence[ShrinkingReplicaSet],
                   possible: Mapping[str, set[int]], burst: int) -> Counter[str]:
    """Pods on each node that may be gone (deleted, so inactive) when `rs` syncs."""
    gone: Counter[str] = Counter()
    for other in shrinking:
        # A scale-down over several syncs sees its own earlier deletions too.
        if other is not rs or rs.removed > burst:
            for pod in other.pods:
                if id(pod) in possible[other.name]:
                    gone[pod.node_name] += 1
    return gone


def _groups_by_rules_1_to_4(pods: Sequence[RankedPod]) -> dict[tuple, list[RankedPod]]:
    groups: dict[tuple, list[RankedPod]] = defaultdict(list)
    for pod in pods:
        groups[pod.key_rules_1_to_5[:4]].append(pod)
    return groups


def _possible(rs: ShrinkingReplicaSet, gone: Counter[str],
              node_counts: Mapping[str, int]) -> set[int]:
    """Pods that go in the order most favourable to deleting each of them."""
    if rs.removed <= 0:
        return set()
    result = set()
    ahead = 0  # pods in groups strictly before on rules 1-4
    for _key, members in sorted(_groups_by_rules_1_to_4(rs.pods).items()):
        by_node = _by_node(members)
        # Pods on other nodes strictly ahead: their node's lowest rank above this node's
        # full count (this node's own lowest rank never is, so it needs no exclusion).
        lowest = _RankCounts({node: node_counts.get(node, 0) - gone[node] for node in by_node},
                             by_node)
        for node, pods in by_node.items():
            if ahead + lowest.above(node_counts.get(node, 0)) < rs.removed:
                result.update(id(pod) for pod in pods)
        ahead += len(members)
        if ahead >= rs.removed:
            break
    return result


def _certain(rs: ShrinkingReplicaSet, gone: Counter[str],
             node_counts: Mapping[str, int]) -> set[int]:
    """Pods that go in every order, even the one least favourable to deleting them."""
    result = set()
    ahead = 0
    for _key, members in sorted(_groups_by_rules_1_to_4(rs.pods).items()):
        if ahead >= rs.removed:
            break
        by_node = _by_node(members)
        full = _RankCounts({node: node_counts.get(node, 0) for node in by_node}, by_node)
        for node, pods in by_node.items():
            # Ahead of or tied with a pod here, at its node's lowest rank: every other
            # member on a node whose full rank is at least that (its own node included).
            not_after = full.at_least(node_counts.get(node, 0) - gone[node]) - 1
            if ahead + not_after < rs.removed:
                result.update(id(pod) for pod in pods)
        ahead += len(members)
    return result


def _whole_groups_before_cut(rs: ShrinkingReplicaSet) -> set[int]:
    """Pods of the rules 1-4 groups that lie wholly within the `removed` first.

    Rules 1-4 are each pod's own (not its node's rank), so every sync takes what is
    left of an earlier group before any pod of a later one, whatever the ranks: over
    all of its syncs the ReplicaSet deletes these groups entirely.
    """
    result: set[int] = set()
    ahead = 0
    for _key, members in sorted(_groups_by_rules_1_to_4(rs.pods).items()):
        ahead += len(members)
        if ahead > rs.removed:
            break
        result.update(map(id, members))
    return result


def _by_node(pods: Sequence[RankedPod]) -> dict[str, list[RankedPod]]:
    grouped: dict[str, list[RankedPod]] = defaultdict(list)
    for pod in pods:
        grouped[pod.node_name].append(pod)
    return grouped


class _RankCounts:
    """How many pods sit on nodes whose rank is above, or at least, a given value."""

    def __init__(self, ranks: Mapping[str, int],
                 pods_per_node: Mapping[str, Sequence[RankedPod]]) -> None:
        pairs = sorted((rank, len(pods_per_node[node])) for node, rank in ranks.items())
        self._ranks = [rank for rank, _ in pairs]
        self._from = [0] * (len(pairs) + 1)  # pods on nodes from index i to the end
        for index in range(len(pairs) - 1, -1, -1):
            self._from[index] = self._from[index + 1] + pairs[index][1]

    def above(self, rank: int) -> int:
        return self._from[bisect_right(self._ranks, rank)]

    def at_least(self, rank: int) -> int:
        return self._from[bisect_left(self._ranks, rank)]
