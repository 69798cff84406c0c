"""The Argo Rollouts controller's replica arithmetic for a Rollout's ReplicaSets.

Ported from github.com/argoproj/argo-rollouts v1.10 (branch release-1.10):
- utils/replicaset/canary.go: CalculateReplicaCountsForBasicCanary,
  approximateWeightedCanaryStableReplicaCounts, calculateScaleDownReplicaCount,
  adjustReplicaWithinLimits, CalculateReplicaCountsForTrafficRoutedCanary (with
  `dynamicStableScale`), CheckMinPodsPerReplicaSet, GetCanaryReplicasOrWeight,
  GetDesiredCanaryWeight, GetCurrentSetWeight, UseSetCanaryScale, GetReplicasForScaleDown;
- utils/replicaset/replicaset.go: NewRSNewReplicas, MaxSurge, MaxUnavailable,
  resolveFenceposts;
- utils/defaults/defaults.go: `maxSurge` and `maxUnavailable` default to "25" (a string,
  which the legacy intstr.GetValueFromIntOrPercent reads as 25 percent: it drops every
  "%"), `spec.replicas` to 1, `abortScaleDownDelaySeconds` to 30;
- utils/weightutil/weight.go: the maximum weight is 100 unless
  `trafficRouting.maxTrafficWeight` says otherwise.

The functions read a ReplicaSet as the controller does: `spec.replicas` and
`status.availableReplicas` (`Counted`), so callers can replay syncs on changed values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..objects.kube import go_parse_int, spec_of, status_of

DEFAULT_SURGE = "25"  # defaults.DefaultMaxSurge / DefaultMaxUnavailable: no "%"


@dataclass
class Counted:
    """A ReplicaSet as the arithmetic reads it: its name, spec.replicas and availability."""

    name: str
    pod_hash: str
    replicas: int
    available: int


def strategy(rollout: Mapping[str, Any], which: str) -> Mapping[str, Any] | None:
    """`spec.strategy.canary` or `spec.strategy.blueGreen`, None when absent."""
    found = (spec_of(rollout).get("strategy") or {}).get(which)
    return found if isinstance(found, Mapping) else None


def canary_of(rollout: Mapping[str, Any]) -> Mapping[str, Any]:
    """The canary strategy, or an empty mapping (for optional reads)."""
    return strategy(rollout, "canary") or {}


def rollout_replicas(rollout: Mapping[str, Any]) -> int:
    """defaults.GetReplicasOrDefault: spec.replicas, 1 when unset."""
    value = spec_of(rollout).get("replicas")
    return 1 if value is None else int(value)


def legacy_int_or_percent(value: Any, total: int, round_up: bool) -> int:
    """intstr.GetValueFromIntOrPercent (deprecated, still what the controller calls):
    an int is a count; any string is a percentage once every "%" is removed."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number = go_parse_int(str(value).replace("%", ""))
    if number is None:
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    scaled = float(number) * float(total) / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def _fenceposts(rollout: Mapping[str, Any], replicas: int) -> tuple[int, int]:
    """resolveFenceposts for a canary; an invalid value gives (0, 0) as in Go (the
    error is dropped by MaxSurge and MaxUnavailable; validation rejects such specs)."""
    canary = canary_of(rollout)
    try:
        surge = legacy_int_or_percent(canary.get("maxSurge", DEFAULT_SURGE), replicas, True)
        unavailable = legacy_int_or_percent(canary.get("maxUnavailable", DEFAULT_SURGE),
                                            replicas, False)
    except ValueError:
        return 0, 0
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(rollout: Mapping[str, Any]) -> int:
    """MaxSurge: 0 outside the canary strategy."""
    if strategy(rollout, "canary") is None:
        return 0
    return _fenceposts(rollout, rollout_replicas(rollout))[0]


def max_unavailable(rollout: Mapping[str, Any]) -> int:
    """MaxUnavailable, at most spec.replicas."""
    replicas = rollout_replicas(rollout)
    if replicas == 0:
        return 0
    if strategy(rollout, "canary") is not None:
        unavailable = _fenceposts(rollout, replicas)[1]
    else:
        value = (strategy(rollout, "blueGreen") or {}).get("maxUnavailable", DEFAULT_SURGE)
        try:
            unavailable = legacy_int_or_percent(value, replicas, False)
        except ValueError:
            unavailable = 0
    return min(unavailable, replicas)


def max_weight(rollout: Mapping[str, Any]) -> int:
    """weightutil.MaxTrafficWeight."""
    routing = canary_of(rollout).get("trafficRouting") or {}
    value = routing.get("maxTrafficWeight")
    return 100 if value is None else int(value)


def traffic_routed(rollout: Mapping[str, Any]) -> bool:
    """A canary with `trafficRouting`."""
    return canary_of(rollout).get("trafficRouting") is not None


def current_step(rollout: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, int | None]:
    """GetCurrentCanaryStep: (the step, status.currentStepIndex); (None, None) without
    steps, (None, index) past the last step."""
    steps = canary_of(rollout).get("steps") or []
    if not steps:
        return None, None
    index = int(status_of(rollout).get("currentStepIndex") or 0)
    if index >= len(steps):
        return None, index
    return steps[index], index


def current_set_weight(rollout: Mapping[str, Any]) -> int:
    """GetCurrentSetWeight: 0 when aborted; the last setWeight at or before the current
    step; the maximum weight past the last step (or without steps)."""
    if status_of(rollout).get("abort"):
        return 0
    step, index = current_step(rollout)
    if step is None or index is None:
        return max_weight(rollout)
    steps = canary_of(rollout).get("steps") or []
    for earlier in reversed(steps[: index + 1]):
        if earlier.get("setWeight") is not None:
            return int(earlier["setWeight"])
    return 0


def abort_delay_set(rollout: Mapping[str, Any]) -> tuple[bool, bool]:
    """GetAbortScaleDownDelaySecondsOrDefault: (a delay applies, the field was set).
    An explicit 0 means no delay at all (the canary or preview stays up)."""
    for which in ("blueGreen", "canary"):
        found = strategy(rollout, which)
        if found is None or (which == "canary" and found.get("trafficRouting") is None):
            continue
        value = found.get("abortScaleDownDelaySeconds")
        if value is None:
            return True, False
        return int(value) != 0, True
    return True, False


def set_canary_scale(rollout: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """UseSetCanaryScale: the last setCanaryScale at or before the current step, when
    traffic routing is on and it is not `matchTrafficWeight`."""
    if not traffic_routed(rollout):
        return None
    if status_of(rollout).get("abort") and abort_delay_set(rollout)[0]:
        return None
    step, index = current_step(rollout)
    if step is None or index is None:
        return None
    for earlier in reversed((canary_of(rollout).get("steps") or [])[: index + 1]):
        scale = earlier.get("setCanaryScale")
        if scale is None:
            continue
        return None if scale.get("matchTrafficWeight") else scale
    return None


def desired_canary_weight(rollout: Mapping[str, Any], new: Counted | None,
                          stable: Counted | None) -> int:
    """GetDesiredCanaryWeight: an aborted rollout with dynamicStableScale steps back
    through the setWeights by availability; otherwise the current setWeight."""
    canary = canary_of(rollout)
    if (status_of(rollout).get("abort") and canary.get("dynamicStableScale")
            and new is not None and stable is not None):
        replicas = rollout_replicas(rollout)
        canary_replicas = max(replicas - stable.available, new.available)
        for step in reversed(canary.get("steps") or []):
            weight = step.get("setWeight")
            if weight is not None and _weight_to_replicas(
                    replicas, int(weight), max_weight(rollout)) < canary_replicas:
                return int(weight)
        return 0
    return current_set_weight(rollout)


def canary_replicas_or_weight(rollout: Mapping[str, Any], new: Counted | None,
                              stable: Counted | None) -> tuple[int | None, int]:
    """GetCanaryReplicasOrWeight: (setCanaryScale replicas or None, weight)."""
    status = status_of(rollout)
    stable_hash = status.get("stableRS") or ""
    if status.get("promoteFull") or not stable_hash or (
            (status.get("currentPodHash") or "") == stable_hash):
        return None, max_weight(rollout)
    scale = set_canary_scale(rollout)
    if scale is not None:
        if scale.get("replicas") is not None:
            return int(scale["replicas"]), 0
        if scale.get("weight") is not None:
            return None, int(scale["weight"])
    return None, desired_canary_weight(rollout, new, stable)


def stable_exists(new: Counted | None, stable: Counted | None) -> bool:
    """CheckStableRSExists: a stable ReplicaSet other than the new one."""
    return stable is not None and (new is None or new.name != stable.name)


def replicas_for_scale_down(rs: Counted | None, ignore_availability: bool) -> int:
    """GetReplicasForScaleDown."""
    if rs is None:
        return 0
    if rs.replicas < rs.available or ignore_availability:
        return rs.replicas
    return rs.available


def basic_canary_counts(rollout: Mapping[str, Any], new: Counted | None,
                        stable: Counted | None, others: Sequence[Counted]) -> tuple[int, int]:
    """CalculateReplicaCountsForBasicCanary: (new, stable) replicas."""
    replicas = rollout_replicas(rollout)
    surge = max_surge(rollout)
    want_new, want_stable = approximate_counts(
        replicas, canary_replicas_or_weight(rollout, new, stable)[1], max_weight(rollout), surge)
    new_count = new.replicas if new is not None else 0
    stable_count = 0
    scale_stable = stable_exists(new, stable)
    if scale_stable:
        assert stable is not None
        stable_count = stable.replicas
    else:  # no canary steps to follow: the new ReplicaSet goes to 100%
        want_new, want_stable = replicas, 0
    allowed = replicas + surge
    counted = [*others, new, *([stable] if scale_stable else [])]
    scale_up = allowed - sum(rs.replicas for rs in counted if rs is not None)
    if scale_stable and stable is not None and stable.replicas < want_stable and scale_up > 0:
        if stable.replicas + scale_up < want_stable:
            stable_count, scale_up = stable.replicas + scale_up, 0
        else:
            stable_count = want_stable
            scale_up -= want_stable - stable.replicas
    if new is not None and new.replicas < want_new and scale_up > 0:
        new_count = min(new.replicas + scale_up, want_new)
    if sum(rs.replicas for rs in others) > 0:  # older ReplicaSets shrink first
        return new_count, stable_count
    min_available = replicas - max_unavailable(rollout)
    increasing = new is None or want_new >= new.replicas
    to_scale_down = (replicas_for_scale_down(new, not increasing)
                     + replicas_for_scale_down(stable, increasing))
    if to_scale_down <= min_available:
        return new_count, stable_count
    scale_down = to_scale_down - min_available
    if not increasing:
        new_count = _scale_down_count(new, want_new, scale_down, new_count)
        new_count, stable_count = _within_limits(new, stable, new_count, stable_count,
                                                 allowed, min_available)
    elif scale_stable:
        stable_count = _scale_down_count(stable, want_stable, scale_down, stable_count)
        stable_count, new_count = _within_limits(stable, new, stable_count, new_count,
                                                 allowed, min_available)
    return new_count, stable_count


def approximate_counts(replicas: int, weight: int, maximum: int,
                       surge: int) -> tuple[int, int]:
    """approximateWeightedCanaryStableReplicaCounts: the (canary, stable) split closest
    to `weight`, over spec.replicas and, with surge, spec.replicas + 1; the first of
    equally close options wins."""
    if replicas == 0:
        return 0, 0
    ceil_count = math.ceil(float(replicas * weight) / float(maximum))
    floor_count = math.floor(float(replicas * weight) / float(maximum))
    zero_allowed = weight in (maximum, 0) or (replicas == 1 and surge == 0)
    options = []
    if ceil_count < replicas or zero_allowed:
        options.append((ceil_count, replicas))
    if not _tied(weight, maximum, replicas) and (floor_count != 0 or zero_allowed):
        options.append((floor_count, replicas))
    if surge > 0:
        options.append((ceil_count, replicas + 1))
        if not _tied(weight, maximum, replicas + 1) and (floor_count != 0 or zero_allowed):
            options.append((floor_count, replicas + 1))
    if not options:
        return 0, replicas
    best = options[0]
    for option in options[1:]:
        if _delta(weight, maximum, *option) < _delta(weight, maximum, *best):
            best = option
    return best[0], best[1] - best[0]


def _tied(weight: int, maximum: int, total: int) -> bool:
    """floorCeilingTied: math.Modf(total * (weight / max)) has fraction 0.5."""
    product = float(total) * (float(weight) / float(maximum))
    return product - math.trunc(product) == 0.5


def _delta(weight: int, maximum: int, canary: int, total: int) -> float:
    return abs(float(canary * maximum) / float(total) - float(weight))


def _scale_down_count(drain: Counted | None, desired: int, scale_down: int,
                      count: int) -> int:
    """calculateScaleDownReplicaCount."""
    if drain is not None and drain.replicas > desired:
        return max(desired, drain.replicas - scale_down)
    return count


def _within_limits(drain: Counted | None, adjust: Counted | None, drain_count: int,
                   adjust_count: int, allowed: int, min_available: int) -> tuple[int, int]:
    """adjustReplicaWithinLimits: (drain, adjust) counts within maxSurge and
    maxUnavailable."""
    over = max(0, adjust_count + drain_count - allowed)
    available = min(drain.available, drain_count) if drain is not None else 0
    if adjust is not None:
        adjust_count -= over
        available += min(adjust.available, adjust_count)
        extra = max(0, adjust.available - adjust_count)
        adjust_count += min(extra, max(0, min_available - available))
        drain_count -= max(0, adjust_count + drain_count - allowed)
    return drain_count, adjust_count


def min_pods(rollout: Mapping[str, Any], count: int) -> int:
    """CheckMinPodsPerReplicaSet (traffic routing only), capped at spec.replicas."""
    canary = canary_of(rollout)
    minimum = canary.get("minPodsPerReplicaSet")
    if count == 0 or minimum is None or canary.get("trafficRouting") is None:
        return count
    return max(count, min(int(minimum), rollout_replicas(rollout)))


def traffic_routed_counts(rollout: Mapping[str, Any], new: Counted | None,
                          stable: Counted | None) -> tuple[int, int]:
    """CalculateReplicaCountsForTrafficRoutedCanary with `status.canary.weights` (what
    the scaling sync reads): (canary, stable) replicas."""
    replicas = rollout_replicas(rollout)
    maximum = max_weight(rollout)
    set_replicas, weight = canary_replicas_or_weight(rollout, new, stable)
    canary_count = (set_replicas if set_replicas is not None
                    else min_pods(rollout, _weight_to_replicas(replicas, weight, maximum)))
    if not canary_of(rollout).get("dynamicStableScale"):
        return canary_count, replicas
    stable_count = _weight_to_replicas(replicas, maximum - weight, maximum)
    weights = (status_of(rollout).get("canary") or {}).get("weights")
    if weights:
        stable_count = max(stable_count, _weight_to_replicas(
            replicas, int((weights.get("stable") or {}).get("weight") or 0), maximum))
        if status_of(rollout).get("abort"):
            canary_count = max(canary_count, _weight_to_replicas(
                replicas, int((weights.get("canary") or {}).get("weight") or 0), maximum))
    return min_pods(rollout, canary_count), min_pods(rollout, stable_count)


def _weight_to_replicas(replicas: int, weight: int, maximum: int) -> int:
    """trafficWeightToReplicas: rounded up."""
    return math.ceil(float(weight) * float(replicas) / float(maximum))


def new_rs_replicas(rollout: Mapping[str, Any], new: Counted, stable: Counted | None,
                    others: Sequence[Counted]) -> int:
    """NewRSNewReplicas: the new ReplicaSet's replicas (canary, or blue-green with
    `previewReplicaCount`)."""
    blue_green = strategy(rollout, "blueGreen")
    if blue_green is not None:
        return _blue_green_new_replicas(rollout, blue_green, new, [*others, new, stable])
    if traffic_routed(rollout):
        return traffic_routed_counts(rollout, new, stable)[0]
    return basic_canary_counts(rollout, new, stable, others)[0]


def _blue_green_new_replicas(rollout: Mapping[str, Any], blue_green: Mapping[str, Any],
                             new: Counted, everything: Sequence[Counted | None]) -> int:
    replicas = rollout_replicas(rollout)
    preview = blue_green.get("previewReplicaCount")
    if preview is None:
        return replicas
    status = status_of(rollout)
    active_hash = (status.get("blueGreen") or {}).get("activeSelector") or ""
    active = next((rs for rs in everything if rs is not None and active_hash
                   and rs.pod_hash == active_hash), None)
    if active is None or active.name == new.name or status.get("promoteFull"):
        return replicas
    if new.pod_hash != (status.get("currentPodHash") or ""):
        return int(preview)
    resumed = not spec_of(rollout).get("paused") and not status.get("pauseConditions")
    if resumed and (status.get("blueGreen") or {}).get("scaleUpPreviewCheckPoint"):
        return replicas
    return int(preview)
