"""The canary steps that follow when the current one completes with a scale's new count.

Ported from github.com/argoproj/argo-rollouts v1.10.2:
- rollout/canary.go `syncRolloutStatusCanary` and `completedCurrentCanaryStep`: every
  full sync moves `status.currentStepIndex` on once the current step is complete. A
  `setWeight` or `setCanaryScale` step is complete at `AtDesiredReplicaCountsForCanary`
  (utils/replicaset/canary.go): the new ReplicaSet at its desired count with that many
  pods available (or `replicaProgressThreshold`), the stable one at its desired count
  (not read with traffic routing and `dynamicStableScale`), and for a basic canary no
  available pod in older ReplicaSets. A `setWeight` with traffic routing also waits for
  the weight to be verified, which poolguard does not read: it is taken as verified.
- rollout/pause.go `CompletedCanaryPauseStep`: a pause with a duration ends when it has
  passed; one without waits for someone to resume the rollout.

A scale-down can complete the current step itself: fewer replicas make the step's split
reachable with the canary pods available now. A pause with a duration, or a route step,
completes by itself within a time the objects bound. Either way the controller goes on
with the following steps with the new count. Those are followed here up to the first
pause without a duration (or the end of the steps, which promotes the canary and takes
the old stable ReplicaSet to 0), and each ReplicaSet's lowest size on the way is
reported. The time a later step takes depends on things the objects do not say (new
canary pods becoming ready, an analysis or experiment succeeding, taken as succeeding),
so the sizes are what may happen: the caller makes the pods they remove possible
victims, which the verdict judges in the worst case. A current step that waits on more
than time (canary pods coming up, an analysis, someone resuming) is the rollout's own
progress, with or without the scale, and is not followed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..objects.kube import status_of
from .argo_rollout_counts import (
    Counted,
    basic_canary_counts,
    canary_of,
    current_set_weight,
    max_weight,
    strategy,
    traffic_routed,
    traffic_routed_counts,
)
from .argo_rollout_sync import (
    Availability,
    Tracked,
    Variant,
    halted,
    reachable_lowest,
    replay,
)

_SIZING_STEPS = ("setWeight", "setCanaryScale")


@dataclass
class FollowingSteps:
    """What the steps after the current one may do once it completes with the new count."""

    completed: int  # the index of the current step, which completes
    how: str  # how it completes
    lowest: dict[str, int]  # each ReplicaSet's lowest size over the following steps
    followed: list[int]  # the indexes of the steps followed
    stop: str  # where and why the following stops


def following_steps(rollout: Mapping[str, Any], states: Sequence[Tracked],
                    new_name: str | None, stable_name: str | None,
                    variants: Sequence[Variant], fresh: Availability) -> FollowingSteps | None:
    """The steps the scaled `rollout` (carrying the new spec.replicas) goes through once
    its current step completes, from the ReplicaSets' `states` before the scale; None
    when the current step waits on more than time (pods coming up, an analysis, someone
    resuming)."""
    steps = canary_of(rollout).get("steps") or []
    index = int(status_of(rollout).get("currentStepIndex") or 0)
    if not _moves_steps(rollout) or index >= len(steps):
        return None
    scaled = replay(rollout, states, new_name, stable_name, variants[0])
    now = [replace(rs, replicas=scaled.final[rs.name],
                   available=min(scaled.final[rs.name], fresh(rs.name, scaled.lowest[rs.name])),
                   lowest=scaled.lowest[rs.name]) for rs in states]
    how = _how_it_completes(rollout, steps[index], now, new_name, stable_name)
    if how is None:
        return None
    completed = index
    lowest = {rs.name: rs.lowest for rs in now}
    followed: list[int] = []
    for index in range(completed + 1, len(steps)):
        step = steps[index]
        pause = step.get("pause")
        if isinstance(pause, Mapping) and pause.get("duration") is None:
            return FollowingSteps(completed, how, lowest, followed,
                                  f"the pause without a duration at step {index}")
        followed.append(index)
        if any(key in step for key in _SIZING_STEPS):
            now = _sized(_at_step(rollout, index), now, new_name, stable_name, variants,
                         fresh, lowest)
    for rs in now:  # promoted: the old stable and older ReplicaSets go to 0
        if rs.name != new_name:
            lowest[rs.name] = 0
    return FollowingSteps(completed, how, lowest, followed,
                          "the end of the steps, where the canary is promoted and the "
                          "old ReplicaSets go to 0")


def _how_it_completes(rollout: Mapping[str, Any], step: Mapping[str, Any],
                      now: Sequence[Tracked], new_name: str | None,
                      stable_name: str | None) -> str | None:
    """How the current step completes without waiting on more than time, after the
    scale's syncs (`now`); None when it waits on more."""
    if any(key in step for key in _SIZING_STEPS):
        if at_desired_counts(rollout, now, new_name, stable_name):
            return "its split is reached with the canary pods available now"
        return None
    pause = step.get("pause")
    if isinstance(pause, Mapping):
        return None if pause.get("duration") is None else "its pause ends by itself"
    if "setHeaderRoute" in step or "setMirrorRoute" in step:
        return "a route step completes at once"
    return None


def _moves_steps(rollout: Mapping[str, Any]) -> bool:
    """A canary whose full syncs move its steps on (not paused, aborted or promoted)."""
    status = status_of(rollout)
    return (strategy(rollout, "canary") is not None and halted(rollout) is None
            and not status.get("abort") and not status.get("promoteFull"))


def _sized(rollout: Mapping[str, Any], before: Sequence[Tracked], new_name: str | None,
           stable_name: str | None, variants: Sequence[Variant], fresh: Availability,
           lowest: dict[str, int]) -> list[Tracked]:
    """The ReplicaSets after a sizing step's syncs, every order of availability changes
    explored (its new canary pods may come up, or not); `lowest` is lowered in place."""
    for variant in variants:
        found = reachable_lowest(rollout, before, new_name, stable_name, variant, fresh)
        for name in lowest:
            lowest[name] = 0 if found is None else min(lowest[name], found[name])
    done = replay(rollout, before, new_name, stable_name, variants[0])
    return [replace(rs, replicas=done.final[rs.name],
                    available=min(done.final[rs.name], fresh(rs.name, lowest[rs.name])),
                    lowest=done.final[rs.name]) for rs in before]


def _at_step(rollout: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The Rollout at step `index`; with traffic routing, the weights it sets there
    recorded as the router's (what the stable ReplicaSet's count follows)."""
    status = {**status_of(rollout), "currentStepIndex": index}
    moved = {**rollout, "status": status}
    weights = (status.get("canary") or {}).get("weights")
    if traffic_routed(rollout) and weights:
        weight = current_set_weight(moved)
        status["canary"] = {**status["canary"], "weights": {
            **weights, "canary": {**(weights.get("canary") or {}), "weight": weight},
            "stable": {**(weights.get("stable") or {}),
                       "weight": max_weight(rollout) - weight}}}
    return moved


def at_desired_counts(rollout: Mapping[str, Any], states: Sequence[Counted],
                      new_name: str | None, stable_name: str | None) -> bool:
    """AtDesiredReplicaCountsForCanary over `states` (spec.replicas and the pods
    available, the stable ReplicaSet's status at its spec once its victims are gone)."""
    new = next((rs for rs in states if rs.name == new_name), None)
    stable = next((rs for rs in states if rs.name == stable_name and rs is not new), None)
    others = [rs for rs in states if rs is not new and rs is not stable]
    routed = traffic_routed(rollout)
    want_new, want_stable = (traffic_routed_counts(rollout, new, stable) if routed
                             else basic_canary_counts(rollout, new, stable, others))
    if not progress_threshold_met(rollout, new, want_new):
        return False
    if not (routed and canary_of(rollout).get("dynamicStableScale")) and (
            stable is None or stable.replicas != want_stable):
        return False
    return routed or all(rs.available == 0 for rs in others)


def progress_threshold_met(rollout: Mapping[str, Any], new: Counted | None,
                           desired: int) -> bool:
    """ReplicaProgressThresholdMet: every desired pod available, or the threshold."""
    threshold = canary_of(rollout).get("replicaProgressThreshold")
    value = int((threshold or {}).get("value") or 0)
    if threshold is None or new is None or value < 0:
        return new is not None and new.replicas == desired and new.available == desired
    if threshold.get("type") == "Percent":
        return desired == 0 or new.available * 100 >= value * desired
    return new.available >= value
