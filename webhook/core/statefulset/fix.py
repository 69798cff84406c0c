"""The fix of a StatefulSet's scale-down: move the highest ordinals, or wait.

A StatefulSet deletes the ordinals outside the new range, highest first, whatever their
node; deletion cost plays no part. So only a pod that moves changes what goes: deleted,
it is recreated with the same name (and ordinal) where the scheduler places it now.
"""

from __future__ import annotations

from ..scale.fix_facts import FixFacts, fitted, more, wait_option


def by_ordinal(facts: FixFacts) -> list[str]:
    """Which protected pods to move (the highest ordinals first), and what it waits on."""
    options = []
    names = sorted((pod.name for pod in facts.lost), key=_ordinal, reverse=True)
    if names:
        options.append(fitted(lambda shown, left: (
            f"{facts.workload} removes its highest ordinals first whatever their node, so "
            f"only moving them off protected pools helps: kubectl delete pod -n "
            f"{facts.namespace} {shown}{more(left)} recreates them, same names, where the "
            "scheduler places them now; then retry"), names))
    if facts.prediction.blocked:
        options.append(wait_option(facts.prediction.blocked[0].wait))
    return options


def _ordinal(name: str) -> int:
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else -1
