"""The fix of a kind whose ReplicaSets pick their victims by the ranking: a cost, or a wait.

The ReplicaSet controller deletes lower deletion costs first (rule 4), but only among pods
that rules 1-3 do not already separate: a pod that is not ready goes before any cost
counts. During a rollout the Deployment controller (or the Rollouts controller) first
splits the scale-down between ReplicaSets by their size, which no cost changes.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model.fix_facts import FixFacts, fitted, listed, more
from ..objects.deletion_cost import DELETION_COST_ANNOTATION, INT32_MIN
from ..objects.podfacts import PHASE_ORDINAL

_RUNNING = PHASE_ORDINAL["Running"]

# What `plan` says of a victim with no survivor in its ReplicaSet to be compared with, and
# of a pod that goes only if its Deployment's ReplicaSets are synced in another order.
EVERY_POD_GOES = "every pod of its ReplicaSet goes"
SYNC_ORDER_DECIDES = ("goes instead of a predicted victim if the ReplicaSets are synced in "
                      "another order")


def by_cost(rollout_status: str | None = None) -> Callable[[FixFacts], list[str]]:
    """The fix wording of a ReplicaSet-based kind; `rollout_status` is the command that
    waits for its rollout (`{name}` and `{namespace}` filled in), if it has rollouts."""
    def fixes(facts: FixFacts) -> list[str]:
        options = [option for option in (_set_costs(facts), _wait_until_ready(facts))
                   if option]
        split = facts.prediction.child_targets
        if rollout_status and len(split) > 1:
            command = rollout_status.format(name=facts.prediction.name,
                                            namespace=facts.namespace)
            options.append(f"wait for the rollout under way to finish ({command}), then "
                           f"retry: until then the scale-down is split between {len(split)} "
                           "ReplicaSets by their size, which no deletion cost changes")
        return options
    return fixes


def _set_costs(facts: FixFacts) -> str:
    """Annotate the surviving pods outside protected pools with a cost below every
    protected victim's, so that the controller deletes them first."""
    if not facts.lost:
        return ""
    cheapest = min(pod.deletion_cost for pod in facts.lost)
    blocking = [pod for pod in facts.kept_outside if pod.deletion_cost >= cheapest]
    if not blocking:
        return ""
    value = min(cheapest - 1, *map(facts.pool_cost, blocking))
    if value < INT32_MIN:
        return ""
    names = [pod.name for pod in blocking]
    pods = "pod" if len(names) == 1 else "pods"
    return fitted(lambda shown, left: (
        f"give the surviving {pods} outside protected pools a cost below {cheapest}, then "
        f"retry: kubectl annotate pod -n {facts.namespace} {shown} "
        f"{DELETION_COST_ANNOTATION}={value} --overwrite{more(left)}"), names)


def _wait_until_ready(facts: FixFacts) -> str:
    """Protected victims that go first for not being ready: only their readiness helps."""
    unready = [pod.name for pod in facts.lost
               if not pod.ready or pod.phase_ordinal != _RUNNING]
    if not unready or not any(pod.ready for pod in facts.kept_outside):
        return ""
    verb = "is" if len(unready) == 1 else "are"
    return fitted(lambda shown, left: (
        f"wait until {listed(shown.split())}{more(left)} {verb} Running and Ready, then "
        "retry: the ReplicaSet controller deletes a pod that is not before any deletion "
        "cost counts"), unready)
