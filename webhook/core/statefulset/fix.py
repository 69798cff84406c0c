"""The fix of a StatefulSet's scale-down: move the highest ordinals, or wait.

A StatefulSet deletes the ordinals outside the new range, highest first, whatever their
node; deletion cost plays no part. So only a pod that moves changes what goes: deleted,
it is recreated with the same name (and ordinal) and the same PersistentVolumeClaims
where the scheduler places it now, which is most likely the node it left, unless that
node is cordoned first. Meanwhile the pod serves nothing, and what it kept outside its
claims is lost; a claim bound to a local PersistentVolume brings it back to the same node
(cordoned, it stays Pending), so such a pod cannot be moved this way.
"""

from __future__ import annotations

from ..model.fix_facts import FIX_LENGTH, FixFacts, fitted_cordon, more, wait_option


def by_ordinal(facts: FixFacts) -> list[str]:
    """Which protected pods to move (the highest ordinals first), what that costs them,
    and what a stalled scale-down waits on."""
    options = []
    names = sorted((pod.name for pod in facts.lost), key=_ordinal, reverse=True)
    if names:
        # Why only these pods help, when it fits beside a node to cordon.
        text = _move(facts, names, "the highest ordinals go first, whatever their node: ",
                     least_nodes=1)
        options.append(text if len(text) <= FIX_LENGTH else _move(facts, names, ""))
    if facts.prediction.blocked:
        options.append(wait_option(facts.prediction.blocked[0].wait))
    return options


def _move(facts: FixFacts, names: list[str], why: str, least_nodes: int = 0) -> str:
    """Cordon the protected pods' nodes, delete the pods, and what that costs them."""
    one = len(names) == 1
    return fitted_cordon(lambda shown, left, cordon: (
        f"{why}{cordon}, then kubectl delete pod -n {facts.namespace} {shown}{more(left)}: "
        f"{'it' if one else 'each'} is down until recreated with its claims (a local "
        f"PersistentVolume pins {'it' if one else 'one'} to its node); retry, then "
        "uncordon"), names, facts.lost, least_nodes=least_nodes)


def _ordinal(name: str) -> int:
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else -1
