"""An IntOrString field scaled against a total: k8s.io/apimachinery/pkg/util/intstr.

Every controller that reads a `maxSurge` or `maxUnavailable` (the Deployment controller,
LeaderWorkerSet's, OpenKruise's CloneSet) scales it with `GetScaledValueFromIntOrPercent`.
"""

from __future__ import annotations

import math

from .kube import go_parse_int


def scaled_int_or_percent(value: int | str | None, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent; None counts as 0.

    A string must be "<int>%" (strconv.Atoi on what precedes one trailing "%");
    anything else raises ValueError, as Go returns an error.
    """
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        raise ValueError(f"invalid value for IntOrString: {text!r} is not a percentage")
    percent = go_parse_int(text[:-1])
    if percent is None:
        raise ValueError(f"invalid value for IntOrString: {text!r}")
    scaled = float(percent) * float(total) / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)
