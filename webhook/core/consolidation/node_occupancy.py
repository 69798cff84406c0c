"""What holds a node: its active pods as occupancy counts them, and which nodes a scale-down frees.

Training takes whole nodes, so a node counts as free only when no active pod on it holds
a GPU. Occupancy reads, from every pod on the node whatever its owner or namespace, the
GPUs it requests (the policy's `gpuResources`, by default `nvidia.com/gpu`, `amd.com/gpu`,
`gpu.intel.com/i915` and `habana.ai/gaudi`). On a node that offers none of those
resources every active pod counts instead, except DaemonSet pods, which stay on every
node whatever scales down.

The records here are built once from the plain API dicts (`occupant_of`, `gpus_offered`)
and everything else works on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..objects.kube import go_parse_int, meta, name_of, namespace_of, spec_of, status_of
from ..objects.ownership import controller_in

PodRef = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class Occupant:
    """One active pod on a node."""

    ref: PodRef
    owner: str  # the controller that picks victims among its pods (a lone pod: itself)
    gpus: int   # GPUs requested, summed over the counted resource names
    daemon: bool = False  # a DaemonSet's pod: no scale-down removes it


@dataclass(frozen=True)
class NodeLoad:
    """A node, the GPUs it offers (0: it offers none, so pods count) and its active pods."""

    node: str
    pool: str | None
    gpus: int
    occupants: tuple[Occupant, ...]

    def holds(self, occupant: Occupant) -> bool:
        """Does `occupant` keep this node from being free?"""
        return occupant.gpus > 0 if self.gpus > 0 else not occupant.daemon

    @property
    def free(self) -> bool:
        """No pod on the node holds it."""
        return not any(self.holds(occupant) for occupant in self.occupants)

    def holders(self, owner: str) -> tuple[int, bool]:
        """(pods of `owner` that hold the node, whether a pod of another owner holds it)."""
        mine = 0
        others = False
        for occupant in self.occupants:
            if self.holds(occupant):
                if occupant.owner == owner:
                    mine += 1
                else:
                    others = True
        return mine, others


def owner_of(pod: Mapping[str, Any]) -> str:
    """The identity of the controller that deletes among `pod`'s siblings: its controller
    reference's UID (else kind/namespace/name), or the pod itself when it has none."""
    controller = controller_in(meta(pod))
    if controller is None:
        return f"Pod/{namespace_of(pod)}/{name_of(pod)}"
    uid, kind, name = controller
    return uid or f"{kind}/{namespace_of(pod)}/{name}"


def occupant_of(pod: Mapping[str, Any], resources: Sequence[str]) -> Occupant | None:
    """The pod as occupancy counts it, or None when it holds nothing (finished, terminating
    or unscheduled)."""
    if meta(pod).get("deletionTimestamp") or not spec_of(pod).get("nodeName"):
        return None
    if status_of(pod).get("phase") in ("Succeeded", "Failed"):
        return None
    controller = controller_in(meta(pod))
    daemon = controller is not None and controller[1] == "DaemonSet"
    return Occupant((namespace_of(pod), name_of(pod)), owner_of(pod),
                    gpus_requested(pod, resources), daemon)


def gpus_requested(pod: Mapping[str, Any], resources: Sequence[str]) -> int:
    """The pod's effective request of `resources`, as the scheduler sums it: regular
    containers and sidecars add up, a plain init container needs its own at most.

    Extended resources are integers; a request left out defaults to the limit."""
    spec = spec_of(pod)
    total = sum(_container_gpus(c, resources) for c in spec.get("containers") or ())
    init_peak = 0
    for container in spec.get("initContainers") or ():
        gpus = _container_gpus(container, resources)
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            total += gpus
        else:
            init_peak = max(init_peak, gpus)
    return max(total, init_peak)


def gpus_offered(node: Mapping[str, Any] | None, resources: Sequence[str]) -> int:
    """GPUs the node offers: its allocatable (else capacity) of `resources`."""
    status = status_of(node) if node else {}
    offered = status.get("allocatable") or status.get("capacity") or {}
    return sum(_quantity(offered.get(name)) for name in resources) if isinstance(
        offered, Mapping) else 0


def freed_nodes(loads: Iterable[NodeLoad], victims: set[PodRef]) -> list[NodeLoad]:
    """The nodes that the deletion of `victims` leaves with no pod holding them."""
    freed = []
    for load in loads:
        held = [o for o in load.occupants if load.holds(o)]
        if held and all(o.ref in victims for o in held):
            freed.append(load)
    return freed


def best_freed(loads: Iterable[NodeLoad], owner: str, deletions: int) -> int:
    """The most nodes any `deletions` pods of `owner` could free.

    Only nodes held by `owner` alone can be freed, each at the price of its holders; the
    cheapest first frees the most for any budget."""
    prices = sorted(mine for mine, others in (load.holders(owner) for load in loads)
                    if mine and not others)
    freed = 0
    for price in prices:
        if price > deletions:
            break
        deletions -= price
        freed += 1
    return freed


def _container_gpus(container: Any, resources: Sequence[str]) -> int:
    if not isinstance(container, Mapping):
        return 0
    limits_and_requests = container.get("resources") or {}
    requests = limits_and_requests.get("requests") or {}
    limits = limits_and_requests.get("limits") or {}
    return sum(_quantity(requests.get(name, limits.get(name))) for name in resources)


def _quantity(value: Any) -> int:
    """An extended resource's whole quantity ("8", 8); anything else counts as 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, str):
        parsed = go_parse_int(value, 64)
        return max(parsed, 0) if parsed is not None else 0
    return 0
