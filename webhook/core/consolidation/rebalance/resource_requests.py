"""What a pod requests and what a node can still take, in the scheduler's integer units.

The scheduler's NodeResourcesFit compares a pod's requests with the node's allocatable
minus the requests of the pods already bound there (pkg/scheduler/framework/types.go,
`computePodResourceRequest`, component-helpers' `PodRequests`): regular containers and
restartable init containers (sidecars) add up; while a plain init container runs, it
and the sidecars started before it need their sum; the larger of the two counts, and
the pod's `spec.overhead` is added. CPU is counted in millicores, every other resource in whole
units (memory in bytes), quantities rounded up as `resource.Quantity`'s MilliValue and
Value do. The API server defaults a container's missing request to its limit, so a state
file that carries only limits is read the same way. Each bound pod also takes one of the
node's `pods`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from ...objects.kube import spec_of, status_of

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
Resources = dict[str, int]
UNBOUNDED = 2**63 - 1  # a node that lists no `pods` takes any number

_QUANTITY = re.compile(r"([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?")
_SUFFIX = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
           "": Fraction(1), "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9),
           "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
           "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30),
           "Ti": Fraction(2**40), "Pi": Fraction(2**50), "Ei": Fraction(2**60)}


def parse_quantity(value: Any) -> Fraction | None:
    """A `resource.Quantity` ("500m", "16Gi", "1e3", 8) as an exact number; None when it
    is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if not isinstance(value, str):
        return None
    match = _QUANTITY.fullmatch(value.strip())
    if match is None or match.group(1).count(".") > 1 or match.group(1) in ("", ".", "+", "-"):
        return None
    try:
        number = Fraction(match.group(1))
    except (ValueError, ZeroDivisionError):
        return None
    if match.group(2):
        return number * Fraction(10) ** int(match.group(2)[1:])
    return number * _SUFFIX[match.group(3) or ""]


def in_units(resource: str, value: Any) -> int:
    """A quantity in the scheduler's unit for `resource` (millicores for CPU), rounded up;
    an unreadable or negative quantity counts as 0."""
    quantity = parse_quantity(value)
    if quantity is None or quantity < 0:
        return 0
    return math.ceil(quantity * 1000) if resource == CPU else math.ceil(quantity)


def pod_requests(pod: Mapping[str, Any], resources: Iterable[str]) -> Resources:
    """The pod's effective request of each of `resources`, plus one of `pods`."""
    spec = spec_of(pod)
    names = tuple(resources)
    totals = dict.fromkeys(names, 0)
    for container in spec.get("containers") or ():
        _add(totals, _container_requests(container, names))
    sidecars = dict.fromkeys(names, 0)  # the sidecars started so far keep running
    init_peak = dict.fromkeys(names, 0)
    for container in spec.get("initContainers") or ():
        own = _container_requests(container, names)
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            _add(sidecars, own)
            running = sidecars
        else:
            running = {name: sidecars[name] + own[name] for name in names}
        for name in names:
            init_peak[name] = max(init_peak[name], running[name])
    _add(totals, sidecars)
    overhead = spec.get("overhead") or {}
    requests = {name: max(totals[name], init_peak[name]) for name in names}
    if isinstance(overhead, Mapping):
        for name in names:
            requests[name] += in_units(name, overhead.get(name))
    requests[PODS] = 1
    return requests


def allocatable(node: Mapping[str, Any], resources: Iterable[str]) -> Resources:
    """The node's allocatable (else capacity) of each of `resources` and of `pods`; a
    resource the node does not list is 0, except `pods`, which is then unbounded."""
    status = status_of(node)
    offered = status.get("allocatable") or status.get("capacity") or {}
    if not isinstance(offered, Mapping):
        offered = {}
    room = {name: in_units(name, offered.get(name)) for name in resources}
    room[PODS] = in_units(PODS, offered[PODS]) if PODS in offered else UNBOUNDED
    return room


def fits(requests: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """Does a pod requesting `requests` fit in `free`? Resources it does not request
    never stop it, as NodeResourcesFit skips zero requests."""
    return all(amount <= free.get(name, 0) for name, amount in requests.items() if amount)


def _container_requests(container: Any, names: tuple[str, ...]) -> Resources:
    if not isinstance(container, Mapping):
        return dict.fromkeys(names, 0)
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    return {name: in_units(name, requests.get(name, limits.get(name))) for name in names}


def _add(totals: Resources, more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        totals[name] += amount
