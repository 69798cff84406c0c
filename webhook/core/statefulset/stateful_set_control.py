"""Which condemned pods a StatefulSet deletes, and where an OrderedReady scale-down stalls.

Source: pkg/controller/statefulset/stateful_set_control.go (`updateStatefulSet`,
`processReplica`, `processCondemned`) and stateful_set_utils.go (`isRunningAndReady`,
`isUnavailable`, `allowsBurst`), Kubernetes v1.37.

Pods outside the ordinal range [start, start + replicas) are condemned and go highest
ordinal first. With `podManagementPolicy: Parallel` every condemned pod goes at once.
With OrderedReady (monotonic) each sync:

1. walks the pods in range in ascending ordinal order and stops at the first that is
   missing, terminating or not Running and Ready: nothing condemned is deleted then;
2. takes the first unavailable pod: the lowest ordinal in range, else among the
   condemned, that is terminating or whose Ready condition is not True (the phase is
   not looked at);
3. deletes the highest condemned pod, unless it is not Running and Ready and is not
   that first unavailable pod: then it stops and waits, for as long as that lasts.

A pod that is already terminating is waited for and then gone, and a pod that is
Ready but younger than minReadySeconds becomes available by itself: both only delay
the scale-down. So the state it can stall in follows from phase and Ready alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..model.blocked import Wait
from ..objects.podfacts import PHASE_ORDINAL

_RUNNING = PHASE_ORDINAL["Running"]


class StatefulPod(Protocol):
    """What the rule reads from a pod's facts (`podfacts.PodFacts`)."""

    name: str
    phase_ordinal: int
    ready: bool
    deleting: bool


def running_and_ready(pod: StatefulPod) -> bool:
    """isRunningAndReady: phase Running and the Ready condition True."""
    return pod.phase_ordinal == _RUNNING and pod.ready


def condemned_fates(members: Mapping[int, StatefulPod], in_range: range, set_name: str,
                    ordered_ready: bool) -> tuple[list[int], dict[int, Wait]]:
    """(ordinals deleted without waiting, in order; ordinal -> what it waits on).

    `members`: every pod of the StatefulSet by ordinal, whatever its phase (the
    controller counts Failed and Succeeded pods too).
    """
    condemned = sorted((o for o, pod in members.items()
                        if o not in in_range and not pod.deleting), reverse=True)
    if not ordered_ready:
        return condemned, {}
    for ordinal in in_range:
        pod = members.get(ordinal)
        if pod is None or pod.deleting or not running_and_ready(pod):
            wait = _replica_wait(pod, f"{set_name}-{ordinal}")
            return [], dict.fromkeys(condemned, wait)
    return _delete_from_the_top(members, condemned)


def _replica_wait(pod: StatefulPod | None, name: str) -> Wait:
    if pod is None or pod.deleting:
        return Wait(name, f"{name} in the new range does not exist yet: the controller "
                          "creates it and waits for it to be Running and Ready", True)
    return Wait(name, f"{name} in the new range is not Running and Ready", True)


def _delete_from_the_top(members: Mapping[int, StatefulPod],
                         condemned: Sequence[int]) -> tuple[list[int], dict[int, Wait]]:
    """One deletion per sync, highest ordinal first, until a pod makes the controller wait."""
    not_ready = [o for o in condemned if not members[o].ready]  # descending
    gone: list[int] = []
    for index, ordinal in enumerate(condemned):
        pod = members[ordinal]
        while not_ready and not_ready[0] > ordinal:  # deleted already
            not_ready.pop(0)
        first_unavailable = not_ready[-1] if not_ready else None
        if not running_and_ready(pod) and ordinal != first_unavailable:
            wait = Wait(pod.name, _stall_reason(pod, members, first_unavailable))
            return gone, dict.fromkeys(condemned[index:], wait)
        gone.append(ordinal)
    return gone, {}


def _stall_reason(pod: StatefulPod, members: Mapping[int, StatefulPod],
                  first_unavailable: int | None) -> str:
    if first_unavailable is None:
        return (f"{pod.name} is Ready but not Running, and no pod is unavailable: the "
                "controller waits for it to be Running and Ready")
    return (f"{pod.name} is not Running and Ready, and {members[first_unavailable].name} "
            "(a lower ordinal) is the first unavailable pod: the controller waits for "
            f"{pod.name} to be Running and Ready")
