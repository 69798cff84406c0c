"""The fix of a CloneSet's scale-down: undo a specified deletion, or steer by cost.

The CloneSet controller deletes the pods specified for deletion (named in
`spec.scaleStrategy.podsToDelete`, or labelled `apps.kruise.io/specified-delete`) before it
ranks anything, whatever their cost and whatever the count: a cost on another pod never
spares them, only taking the pod out of the list or the label off the pod does. The pods
the ranking chooses are steered by cost, as a ReplicaSet's are.
"""

from __future__ import annotations

from dataclasses import replace

from ..model.fix_facts import FixFacts, fitted, listed, more
from ..replicaset.fix import by_cost
from .cloneset_pod import SPECIFIED_DELETE_LABEL
from .prediction import LABELLED_TO_DELETE, NAMED_AND_LABELLED, NAMED_TO_DELETE

_BY_COST = by_cost()


def by_specified_delete(facts: FixFacts) -> list[str]:
    """What specifies the protected victims for deletion, to remove; the cost for the rest."""
    reasons = facts.prediction.reasons
    named = [p.name for p in facts.lost
             if reasons.get(p.name) in (NAMED_TO_DELETE, NAMED_AND_LABELLED)]
    labelled = [p.name for p in facts.lost
                if reasons.get(p.name) in (LABELLED_TO_DELETE, NAMED_AND_LABELLED)]
    options = [option for option in (_unlist(facts, named), _unlabel(facts, labelled))
               if option]
    specified = set(named) | set(labelled)
    ranked = [pod for pod in facts.lost if pod.name not in specified]
    if ranked or not specified:
        options.extend(_BY_COST(replace(facts, lost=ranked)))
    return options


def _unlist(facts: FixFacts, names: list[str]) -> str:
    """Take the named protected victims out of `podsToDelete`."""
    if not names:
        return ""
    one = len(names) == 1
    return fitted(lambda shown, left: (
        f"remove {listed(shown.split())}{more(left)} from scaleStrategy.podsToDelete unless "
        f"{'it' if one else 'they'} must go (kubectl edit cloneset -n {facts.namespace} "
        f"{facts.prediction.name}), then retry: no cost spares a pod named there"), names)


def _unlabel(facts: FixFacts, names: list[str]) -> str:
    """Take the specified-delete label off the labelled protected victims."""
    if not names:
        return ""
    one = len(names) == 1
    return fitted(lambda shown, left: (
        f"take the label off unless {'it' if one else 'they'} must go, then retry: kubectl "
        f"label pod -n {facts.namespace} {shown} "
        f"{SPECIFIED_DELETE_LABEL}-{more(left)} (no cost spares a pod so labelled)"), names)
