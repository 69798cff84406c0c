"""The room in the protected pools, and whether a set of pods fits in it at once.

A target node's room is its allocatable minus what the pods bound to it request
(`resource_requests`), every pod that has not finished counting, terminating ones too:
the scheduler counts them until they are gone. A set of moving pods fits when each can
be given one node that admits it (`Mover.eligible`) with all of them fitting together.

`place` first assigns the pods largest first (GPUs, then CPU, then memory), each to the
admitting node where it leaves the least room (best fit), so that large holes stay
whole. That can miss a placement when nodes admit only some pods (a taint only some
tolerate) or CPU or memory is tight; then it searches every placement, largest pods
first, for at most PLACE_BUDGET steps. A search cut short says so (`Placed.complete`),
and the plan then frees fewer nodes than it could, never more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...objects.kube import spec_of, status_of
from .overflow_pods import Mover, TargetNode
from .resource_requests import Resources, allocatable, fits, pod_requests

Placement = dict[tuple[str, str], str]  # (namespace, name) -> target node
PLACE_BUDGET = 20000  # search steps for one set of movers


def free_room(targets: Sequence[TargetNode], pods_on_node: Any,
              resources: Sequence[str]) -> dict[str, Resources]:
    """Each target node's allocatable minus the requests of the pods bound there."""
    room: dict[str, Resources] = {}
    for target in targets:
        free = allocatable(target.node, resources)
        for pod in pods_on_node(target.name):
            if not _counts(pod):
                continue
            _take(free, pod_requests(pod, resources))
        room[target.name] = free
    return room


@dataclass(frozen=True)
class Placed:
    """A placement of every mover (`nodes`), or None when none was found; `complete`
    False: the search stopped at PLACE_BUDGET before it could say none exists."""

    nodes: Placement | None
    complete: bool = True


def place(movers: Sequence[Mover], room: Mapping[str, Resources],
          order: Sequence[str]) -> Placed:
    """A node for every mover, all fitting in `room` together (see the module
    docstring); `order` is the resource order that ranks sizes and fits."""
    ranked = sorted(movers, key=lambda m: (*(-m.requests.get(r, 0) for r in order),
                                           len(m.eligible), m.ref))
    quick = _best_fit(ranked, room, order)
    if quick is not None:
        return Placed(quick)
    return _search(ranked, room, order)


def _best_fit(ranked: Sequence[Mover], room: Mapping[str, Resources],
              order: Sequence[str]) -> Placement | None:
    """Each mover, largest first, on the admitting node it leaves the least room on."""
    left = {name: dict(free) for name, free in room.items()}
    placement: Placement = {}
    for mover in ranked:
        options = [name for name in mover.eligible
                   if name in left and fits(mover.requests, left[name])]
        if not options:
            return None
        best = min(options, key=lambda name: (
            *(left[name].get(r, 0) - mover.requests.get(r, 0) for r in order), name))
        _take(left[best], mover.requests)
        placement[mover.ref] = best
    return placement


def _search(ranked: Sequence[Mover], room: Mapping[str, Resources],
            order: Sequence[str]) -> Placed:
    """Every way to place the movers, largest first, until one fits or the budget ends.

    Nodes with the same room left that admit the same movers are interchangeable, so only
    one of them is tried; a state (next mover, room left) that failed is not tried again.
    """
    names = sorted(room)
    admitted = {name: frozenset(i for i, m in enumerate(ranked) if name in m.eligible)
                for name in names}
    failed: set[tuple[int, tuple[tuple[int, ...], ...]]] = set()
    left = [tuple(room[name].get(r, 0) for r in order) for name in names]
    placement: Placement = {}
    steps = [PLACE_BUDGET]

    def visit(index: int) -> bool | None:
        if index == len(ranked):
            return True
        state = (index, tuple(left))
        if state in failed:
            return False
        steps[0] -= 1
        if steps[0] < 0:
            return None
        mover = ranked[index]
        need = tuple(mover.requests.get(r, 0) for r in order)
        tried = set()
        for position, name in enumerate(names):
            have = left[position]
            if index not in admitted[name] or (have, admitted[name]) in tried or any(
                    n and n > h for n, h in zip(need, have, strict=True)):
                continue
            tried.add((have, admitted[name]))
            left[position] = tuple(h - n for h, n in zip(have, need, strict=True))
            placement[mover.ref] = name
            found = visit(index + 1)
            left[position] = have
            if found is not False:
                return found
        failed.add(state)
        return False

    found = visit(0)
    return Placed(dict(placement) if found else None, found is not None)


def _take(free: Resources, requests: Mapping[str, int]) -> None:
    for resource, amount in requests.items():
        free[resource] = free.get(resource, 0) - amount


def _counts(pod: Mapping[str, Any]) -> bool:
    """A bound pod takes room until it has finished (Succeeded or Failed)."""
    return bool(spec_of(pod).get("nodeName")) and \
        status_of(pod).get("phase") not in ("Succeeded", "Failed")
