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

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .ranking import BURST_REPLICAS, RankedPod, TieGroup

_MAX_ROUNDS = 100  # each round only grows a finite set; real cases settle in two or three


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
    for _ in range(_MAX_ROUNDS):
        grown = {rs.name: _possible(rs, _gone_per_node(rs, shrinking, possible, burst),
                                    node_counts) | possible[rs.name] for rs in shrinking}
        if grown == possible:
            break
        possible = grown
    groups: dict[str, TieGroup | None] = {}
    for rs in shrinking:
        gone = _gone_per_node(rs, shrinking, possible, burst)
        # Over several syncs the cut moves between syncs: claim no pod as certain there.
        certain = _certain(rs, gone, node_counts) if rs.removed <= burst else set()
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
    groups = _groups_by_rules_1_to_4(rs.pods)
    keys = sorted(groups)
    result = set()
    ahead = 0  # pods in groups strictly before on rules 1-4
    for key in keys:
        members = groups[key]
        lowest = _node_ranks(members, gone, node_counts, lowest=True)
        for pod in members:
            own = node_counts.get(pod.node_name, 0)
            before = sum(count for node, (rank, count) in lowest.items()
                         if node != pod.node_name and rank > own)
            if ahead + before < rs.removed:
                result.add(id(pod))
        ahead += len(members)
        if ahead >= rs.removed:
            break
    return result


def _certain(rs: ShrinkingReplicaSet, gone: Counter[str],
             node_counts: Mapping[str, int]) -> set[int]:
    """Pods that go in every order, even the one least favourable to deleting them."""
    groups = _groups_by_rules_1_to_4(rs.pods)
    result = set()
    ahead = 0
    for key in sorted(groups):
        members = groups[key]
        if ahead >= rs.removed:
            break
        full = _node_ranks(members, gone, node_counts, lowest=False)
        for pod in members:
            own = node_counts.get(pod.node_name, 0) - gone[pod.node_name]
            same_node = full[pod.node_name][1] - 1
            not_after = same_node + sum(count for node, (rank, count) in full.items()
                                        if node != pod.node_name and rank >= own)
            if ahead + not_after < rs.removed:
                result.add(id(pod))
        ahead += len(members)
    return result


def _node_ranks(members: Sequence[RankedPod], gone: Counter[str], node_counts: Mapping[str, int],
                lowest: bool) -> dict[str, tuple[int, int]]:
    """Per node among `members`: (its rank at the lowest or full count, members on it)."""
    per_node = Counter(pod.node_name for pod in members)
    return {node: (node_counts.get(node, 0) - (gone[node] if lowest else 0), count)
            for node, count in per_node.items()}
