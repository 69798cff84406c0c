"""The fix of a LeaderWorkerSet's scale-down: recreate the protected groups, or wait.

A LeaderWorkerSet removes whole groups, highest group index first, and deletion cost
plays no part. Deleting a group's leader pod makes the controller recreate the whole
group (its worker StatefulSet is owned by the leader pod) where the scheduler places it
now, which is the one way to move a group off the protected pools: the group serves
nothing until all its pods are back and ready (its model loaded again), and its pods most
likely land back on the nodes they left, which have just freed their room, unless those
nodes are cordoned first.
"""

from __future__ import annotations

from ..model.fix_facts import FixFacts, fitted_cordon, listed, more, wait_option
from .leader_worker_set import REPLACED


def by_group(facts: FixFacts) -> list[str]:
    """Which groups' leaders to delete, and what a rolling update or a surge waits on."""
    groups = facts.prediction.units or []
    lost = set(map(id, facts.lost))
    moved = [group for group in groups if group.fate != REPLACED and group.head is not None
             and any(id(pod) in lost for pod in group.pods)]
    options = []
    if moved:
        one = len(moved) == 1
        indexes = [str(group.index) for group in moved]
        leaders = [group.head.name for group in moved if group.head is not None]
        options.append(fitted_cordon(lambda shown, left, cordon: (
            f"{cordon}, then kubectl delete pod -n {facts.namespace} {shown}{more(left)} (the "
            f"leader{'' if one else 's'} of group{'' if one else 's'} {listed(indexes)}): "
            f"{'it serves' if one else 'they serve'} nothing until recreated whole; retry once "
            "off protected pools, then uncordon"),
            leaders, facts.lost))
    replaced = [str(group.index) for group in groups if group.fate == REPLACED]
    if replaced:
        options.append(f"wait for the rolling update under way to complete, then retry: "
                       f"until then it may delete and recreate outdated group"
                       f"{'' if len(replaced) == 1 else 's'} {listed(replaced)}, which the "
                       "scale-down keeps")
    if facts.prediction.blocked:
        options.append(wait_option(facts.prediction.blocked[0].wait))
    return options
