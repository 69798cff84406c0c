"""A port of Kubernetes' pkg/controller/deployment/util/deployment_util.go.

What the Deployment controller's `scale()` reads: the proportion of a change each
ReplicaSet gets (`GetReplicaSetProportion`, `getReplicaSetFraction`), the surge
(`MaxSurge`, `ResolveFenceposts`, intstr's `GetScaledValueFromIntOrPercent`), the new
ReplicaSet (`FindNewReplicaSet`, `EqualIgnoreHash`), saturation (`IsSaturated`) and the
annotations they read, with Go's integer and rounding behaviour.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..objects.intstr import scaled_int_or_percent
from ..objects.kube import (
    annotations_of,
    go_parse_int,
    meta,
    name_of,
    parse_time_ns,
    replicas_of,
    spec_of,
    status_of,
)

MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
_DEFAULT_SURGE = "25%"
_INT32_MAX = 2**31 - 1


def replicaset_proportion(rs: Mapping[str, Any], deployment: Mapping[str, Any], to_add: int,
                          added: int) -> int:
    """GetReplicaSetProportion: the change for `rs` when `to_add` replicas are spread."""
    current = replicas_of(rs, default=0)
    if current == 0 or to_add == 0 or to_add == added:
        return 0
    allowed = to_add - added
    fraction = replicaset_fraction(rs, deployment)
    # Never more than is left to add (scaling up) or to remove (scaling down).
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def replicaset_fraction(rs: Mapping[str, Any], deployment: Mapping[str, Any]) -> int:
    """getReplicaSetFraction, rounding half away from zero like Go's math.Round.

    `deployment` carries the new spec.replicas and the old status.replicas. The size
    before the scale is the RS's max-replicas annotation; a missing, unparsable or zero
    annotation falls back to status.replicas, and when that is 0 too the fraction is 0
    (nothing to be proportional to).
    """
    current = replicas_of(rs, default=0)
    replicas = replicas_of(deployment)
    if replicas == 0:
        return -current
    max_replicas = replicas + max_surge(deployment)
    before = _max_replicas_annotation(rs)
    if not before:
        before = int(status_of(deployment).get("replicas") or 0)
        if before == 0:
            return 0
    # Go multiplies two int32s (wrapping on overflow) before converting to float64.
    return round_half_away(_int32(current * max_replicas) / before) - current


def _int32(value: int) -> int:
    """`value` wrapped to a Go int32."""
    return (value + 2**31) % 2**32 - 2**31


def round_half_away(value: float) -> int:
    """Round to nearest, halves away from zero (Go's math.Round), unlike Python's round().

    Exact: floor(|x| + 0.5) would be wrong where the addition itself rounds, e.g. for
    0.49999999999999994 (Go gives 0) or odd integers above 2**52.
    """
    magnitude = abs(value)
    whole = math.floor(magnitude)
    if magnitude - whole >= 0.5:  # exact: x - floor(x) is representable
        whole += 1
    return whole if value >= 0 else -whole


def _max_replicas_annotation(rs: Mapping[str, Any]) -> int | None:
    return non_negative_int32_annotation(rs, MAX_REPLICAS_ANNOTATION)


def non_negative_int32_annotation(obj: Mapping[str, Any], key: str) -> int | None:
    """getNonNegativeInt32FromAnnotation: strconv.ParseUint(v, 10, 32) capped at MaxInt32.

    None when absent or invalid (no sign, no spaces, ASCII digits only).
    """
    number = go_parse_int(annotations_of(obj).get(key), 32, signed=False)
    return number if number is not None and number <= _INT32_MAX else None


def is_rolling_update(deployment: Mapping[str, Any]) -> bool:
    """The strategy is RollingUpdate (the default), not Recreate."""
    strategy = spec_of(deployment).get("strategy") or {}
    return strategy.get("type", "RollingUpdate") == "RollingUpdate"


def max_surge(deployment: Mapping[str, Any]) -> int:
    """MaxSurge: maxSurge resolved against spec.replicas, percentages rounded up.

    An unparsable value makes ResolveFenceposts fail; MaxSurge ignores the error and
    gets 0, as upstream does ("Error caught by validation").
    """
    if not is_rolling_update(deployment):
        return 0
    rolling = (spec_of(deployment).get("strategy") or {}).get("rollingUpdate") or {}
    try:
        surge, _ = resolve_fenceposts(rolling.get("maxSurge", _DEFAULT_SURGE),
                                      rolling.get("maxUnavailable", _DEFAULT_SURGE),
                                      replicas_of(deployment))
    except ValueError:
        return 0
    return surge


def max_unavailable(deployment: Mapping[str, Any]) -> int:
    """MaxUnavailable: maxUnavailable resolved against spec.replicas (0 when not rolling
    or at 0 replicas, an unparsable value as 0), at most spec.replicas."""
    replicas = replicas_of(deployment)
    if not is_rolling_update(deployment) or replicas == 0:
        return 0
    rolling = (spec_of(deployment).get("strategy") or {}).get("rollingUpdate") or {}
    try:
        _, unavailable = resolve_fenceposts(rolling.get("maxSurge", _DEFAULT_SURGE),
                                            rolling.get("maxUnavailable", _DEFAULT_SURGE),
                                            replicas)
    except ValueError:
        return 0
    return min(unavailable, replicas)


def resolve_fenceposts(max_surge_value: int | str | None, max_unavailable: int | str | None,
                       desired: int) -> tuple[int, int]:
    """ResolveFenceposts: (surge, unavailable); both 0 resolves unavailable to 1.

    None stands for an unset field (intstr.ValueOrDefault(nil, 0)); ValueError for a
    value Go's GetScaledValueFromIntOrPercent rejects.
    """
    surge = scaled_int_or_percent(max_surge_value, desired, True)
    unavailable = scaled_int_or_percent(max_unavailable, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def find_new_replicaset(deployment: Mapping[str, Any],
                        replicasets: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """FindNewReplicaSet: the oldest ReplicaSet whose template equals the Deployment's."""
    template = _template_without_hash(spec_of(deployment).get("template"))
    for rs in by_creation(replicasets):
        if _template_without_hash(spec_of(rs).get("template")) == template:
            return rs
    return None


def _template_without_hash(template: Mapping[str, Any] | None) -> Any:
    """The template minus the pod-template-hash label (EqualIgnoreHash), copied shallowly.

    Like apimachinery's semantic equality, an empty label map equals a missing one.
    """
    template = dict(template or {})
    metadata = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (metadata.get("labels") or {}).items()
              if k != POD_TEMPLATE_HASH_LABEL}
    metadata.pop("labels", None)
    if labels:
        metadata["labels"] = labels
    template["metadata"] = metadata
    return template


def is_saturated(deployment: Mapping[str, Any], rs: Mapping[str, Any] | None) -> bool:
    """IsSaturated: `rs` runs the Deployment's replicas, all available, and says so."""
    if rs is None:
        return False
    # GetDesiredReplicasAnnotation: the same non-negative int32 parse as max-replicas.
    desired = non_negative_int32_annotation(rs, DESIRED_REPLICAS_ANNOTATION)
    if desired is None:
        return False
    replicas = replicas_of(deployment)
    return (replicas_of(rs, default=0) == replicas and desired == replicas
            and int(status_of(rs).get("availableReplicas") or 0) == replicas)


def by_creation(objects: Sequence[Mapping[str, Any]],
                newest_first: bool = False) -> list[Mapping[str, Any]]:
    """ReplicaSetsByCreationTimestamp: oldest first, name breaks ties."""
    ordered = sorted(objects, key=lambda o: (parse_time_ns(meta(o).get("creationTimestamp")) or 0,
                                             name_of(o)))
    return ordered[::-1] if newest_first else ordered
