"""The Rollouts controller's arithmetic, transcribed from argo-rollouts v1.10.2: template
and step hashes (utils/hash, utils/conditions), maxSurge/maxUnavailable
(utils/replicaset/replicaset.go `resolveFenceposts`, `MaxSurge`, `MaxUnavailable`) and the
basic canary split (utils/replicaset/canary.go `CalculateReplicaCountsForBasicCanary` with
`approximateWeightedCanaryStableReplicaCounts`, `adjustReplicaWithinLimits`,
`GetReplicasForScaleDown`, `GetCurrentSetWeight`). ReplicaSets and Rollouts are the API
server's dicts."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from tests.e2e.rollouts_manifests import HASH_LABEL, REVISION

MAX_WEIGHT = 100  # weightutil.MaxTrafficWeight without traffic routing
SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand


def spec_replicas(obj: Mapping[str, Any]) -> int:
    """`defaults.GetReplicasOrDefault`: an absent count is 1."""
    value = obj["spec"].get("replicas")
    return 1 if value is None else int(value)


def available(rs: Mapping[str, Any] | None) -> int:
    return int(((rs or {}).get("status") or {}).get("availableReplicas") or 0)


def status_replicas(rs: Mapping[str, Any] | None) -> int:
    return int(((rs or {}).get("status") or {}).get("replicas") or 0)


def pod_hash(rs: Mapping[str, Any] | None) -> str:
    return ((rs or {}).get("metadata", {}).get("labels") or {}).get(HASH_LABEL, "")


def rs_annotations(rs: Mapping[str, Any]) -> dict[str, str]:
    return dict(rs["metadata"].get("annotations") or {})


def revision(rs: Mapping[str, Any]) -> int:
    try:
        return int(rs_annotations(rs).get(REVISION, "0"))
    except ValueError:
        return 0


def safe_encode(text: str) -> str:
    """`rand.SafeEncodeString`: each byte mapped onto consonants and digits."""
    return "".join(SAFE_ALPHANUMS[ord(c) % len(SAFE_ALPHANUMS)] for c in text)


def fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def template_hash(template: Mapping[str, Any], collisions: int | None = None) -> str:
    """`hash.ComputePodTemplateHash`'s shape: fnv32a of the JSON template (and collision
    count), decimal, safe-encoded."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collisions is not None:
        data += int(collisions).to_bytes(8, "little")
    return safe_encode(str(fnv32a(data)))


def steps_hash(rollout: Mapping[str, Any]) -> str:
    """`conditions.ComputeStepHash`: empty for blue-green."""
    canary = rollout["spec"]["strategy"].get("canary")
    if canary is None:
        return ""
    data = json.dumps(canary.get("steps") or [], sort_keys=True, separators=(",", ":"))
    return safe_encode(str(fnv32a(data.encode())))


def int_or_percent(value: int | str | None, total: int, round_up: bool) -> int:
    """`intstr.GetScaledValueFromIntOrPercent`; a string without % is an error (ValueError)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError(f"invalid type: string is not a percentage: {value!r}")
    scaled = int(value[:-1]) * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def resolve_fenceposts(surge: int | str | None, unavailable: int | str | None,
                       desired: int) -> tuple[int, int]:
    """utils/replicaset/replicaset.go `resolveFenceposts`; on an error (0, 0) as its callers
    see it (they drop the error)."""
    try:
        max_surge = int_or_percent(surge, desired, True)
        max_unavailable = int_or_percent(unavailable, desired, False)
    except ValueError:
        return 0, 0
    if max_surge == 0 and max_unavailable == 0:
        max_unavailable = 1
    return max_surge, max_unavailable


def max_surge(rollout: Mapping[str, Any]) -> int:
    canary = rollout["spec"]["strategy"].get("canary")
    if canary is None:
        return 0
    return resolve_fenceposts(canary.get("maxSurge", "25"), canary.get("maxUnavailable", "25"),
                              spec_replicas(rollout))[0]


def max_unavailable(rollout: Mapping[str, Any]) -> int:
    replicas = spec_replicas(rollout)
    if replicas == 0:
        return 0
    strategy = rollout["spec"]["strategy"]
    if "canary" in strategy:
        canary = strategy["canary"]
        value = resolve_fenceposts(canary.get("maxSurge", "25"),
                                   canary.get("maxUnavailable", "25"), replicas)[1]
    else:
        try:
            value = int_or_percent(strategy["blueGreen"].get("maxUnavailable", "25"),
                                   replicas, False)
        except ValueError:
            value = 0
    return min(value, replicas)


# --- the canary split (utils/replicaset/canary.go) -----------------------------------------

def floor_ceiling_tied(weight: int, total: int) -> bool:
    product = total * (weight / MAX_WEIGHT)
    return product - math.floor(product) == 0.5


def weight_delta(weight: int, canary: int, total: int) -> float:
    return abs(canary * MAX_WEIGHT / total - weight)


def approximate_counts(replicas: int, weight: int, surge: int) -> tuple[int, int]:
    """`approximateWeightedCanaryStableReplicaCounts`: (canary, stable)."""
    if replicas == 0:
        return 0, 0
    ceil_count = math.ceil(replicas * weight / MAX_WEIGHT)
    floor_count = math.floor(replicas * weight / MAX_WEIGHT)
    tied = floor_ceiling_tied(weight, replicas)
    zero_allowed = weight in (MAX_WEIGHT, 0) or (replicas == 1 and surge == 0)
    options: list[tuple[int, int]] = []
    if ceil_count < replicas or zero_allowed:
        options.append((ceil_count, replicas))
    if not tied and (floor_count != 0 or zero_allowed):
        options.append((floor_count, replicas))
    if surge > 0:
        options.append((ceil_count, replicas + 1))
        if not floor_ceiling_tied(weight, replicas + 1) and (floor_count != 0 or zero_allowed):
            options.append((floor_count, replicas + 1))
    if not options:
        return 0, replicas
    best = options[0]
    for option in options[1:]:  # the first of equal deltas wins
        if weight_delta(weight, *option) < weight_delta(weight, *best):
            best = option
    return best[0], best[1] - best[0]


def current_set_weight(rollout: Mapping[str, Any]) -> int:
    """`GetCanaryReplicasOrWeight` without traffic routing (so no setCanaryScale):
    full weight when promoting fully or with no stable (or stable = current), else
    `GetCurrentSetWeight`."""
    status = rollout.get("status") or {}
    if (status.get("promoteFull") or not status.get("stableRS")
            or status.get("currentPodHash") == status.get("stableRS")):
        return MAX_WEIGHT
    if status.get("abort"):
        return 0
    steps = rollout["spec"]["strategy"]["canary"].get("steps") or []
    index = int(status.get("currentStepIndex") or 0)
    if not steps or index >= len(steps):
        return MAX_WEIGHT
    for step in reversed(steps[:index + 1]):
        if step.get("setWeight") is not None:
            return int(step["setWeight"])
    return 0


def replicas_for_scale_down(rs: Mapping[str, Any] | None, ignore_availability: bool) -> int:
    """`GetReplicasForScaleDown`."""
    if rs is None:
        return 0
    if spec_replicas(rs) < available(rs):
        return spec_replicas(rs)
    return spec_replicas(rs) if ignore_availability else available(rs)


def adjust_within_limits(drain: Mapping[str, Any] | None, adjust: Mapping[str, Any] | None,
                         drain_count: int, adjust_count: int, max_allowed: int,
                         min_available: int) -> tuple[int, int]:
    """`adjustReplicaWithinLimits`: (drain count, adjust count)."""
    over = max(0, adjust_count + drain_count - max_allowed)
    total_available = min(available(drain), drain_count) if drain is not None else 0
    if adjust is not None:
        adjust_count -= over
        total_available += min(available(adjust), adjust_count)
        extra = max(0, available(adjust) - adjust_count)
        needed = max(0, min_available - total_available)
        adjust_count += min(extra, needed)
        over = max(0, adjust_count + drain_count - max_allowed)
        drain_count -= over
    return drain_count, adjust_count


def basic_canary_counts(rollout: Mapping[str, Any], new: Mapping[str, Any] | None,
                        stable: Mapping[str, Any] | None,
                        others: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """`CalculateReplicaCountsForBasicCanary`: (new count, stable count)."""
    replicas = spec_replicas(rollout)
    surge = max_surge(rollout)
    desired_new, desired_stable = approximate_counts(replicas, current_set_weight(rollout),
                                                     surge)
    new_count = spec_replicas(new) if new is not None else 0
    scale_stable = stable is not None and (new is None
                                           or new["metadata"]["name"] != stable["metadata"]["name"])
    stable_count = 0
    if scale_stable:
        stable_count = spec_replicas(stable)
    else:
        desired_new, desired_stable = replicas, 0
    max_allowed = replicas + surge
    counted = [*others, *([new] if new is not None else []), *([stable] if scale_stable else [])]
    scale_up = max_allowed - sum(spec_replicas(rs) for rs in counted)
    if scale_stable and spec_replicas(stable) < desired_stable and scale_up > 0:
        if spec_replicas(stable) + scale_up < desired_stable:
            stable_count, scale_up = spec_replicas(stable) + scale_up, 0
        else:
            stable_count = desired_stable
            scale_up -= desired_stable - spec_replicas(stable)
    if new is not None and spec_replicas(new) < desired_new and scale_up > 0:
        new_count = min(spec_replicas(new) + scale_up, desired_new)
    if sum(spec_replicas(rs) for rs in others) > 0:
        return new_count, stable_count
    min_available = replicas - max_unavailable(rollout)
    increasing = new is None or desired_new >= spec_replicas(new)
    # The stable ReplicaSet counts here even when it is the new one (at steady state):
    # the controller passes it as it is.
    to_scale_down = (replicas_for_scale_down(new, not increasing)
                     + replicas_for_scale_down(stable, increasing))
    if to_scale_down <= min_available:
        return new_count, stable_count
    scale_down = to_scale_down - min_available
    if not increasing:
        if new is not None and spec_replicas(new) > desired_new:
            new_count = max(desired_new, spec_replicas(new) - scale_down)
        new_count, stable_count = adjust_within_limits(
            new, stable, new_count, stable_count, max_allowed, min_available)
    elif scale_stable:
        if spec_replicas(stable) > desired_stable:
            stable_count = max(desired_stable, spec_replicas(stable) - scale_down)
        stable_count, new_count = adjust_within_limits(stable, new, stable_count, new_count,
                                                       max_allowed, min_available)
    return new_count, stable_count
