"""Which whole nodes to empty: as many as the room in the protected pools allows.

A candidate is a node of an unprotected pool whose every GPU pod may move (`Mover`).
Emptying a set of candidates needs all their pods placed at once (`room.place`).

When the candidates' pods are alike (the same requests, admitted by the same nodes),
taking the candidates with the fewest GPUs first frees the most nodes: any k nodes
need at least the pods of the k smallest. So the choice starts from that greedy pass,
in the order fewest GPUs, fewest pods, name. When pods differ (sizes, tolerations,
node affinity), the smallest nodes can take room that two others would have shared, so
the choice then searches larger sets: for each size above the greedy's, down from the
most the room's totals allow, the sets in that same order, and takes the first that
places. The search stops after SEARCH_BUDGET sets (`Choice.exhaustive` False), keeping
the best found; with few candidates it is complete. A placement search cut short
(`room.Placed`) makes the choice not exhaustive too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from .overflow_pods import Mover
from .resource_requests import Resources
from .room import Placement, place

SEARCH_BUDGET = 4000


@dataclass(frozen=True)
class Candidate:
    """A node every GPU pod of which may move."""

    node: str
    pool: str | None
    gpus: int  # the GPUs the node offers (what training gets back)
    movers: tuple[Mover, ...]

    @property
    def load(self) -> int:
        """The GPUs its pods request: what the room must take."""
        return sum(mover.gpus for mover in self.movers)


@dataclass
class Choice:
    """The nodes to empty, where each of their pods fits, and whether the search was
    complete."""

    nodes: list[Candidate] = field(default_factory=list)
    placement: Placement = field(default_factory=dict)
    exhaustive: bool = True


def choose_nodes(candidates: Sequence[Candidate], room: Mapping[str, Resources],
                 order: Sequence[str]) -> Choice:
    """The most candidates whose pods fit in `room` together (see the module docstring);
    `order` ranks resources for the placement (GPUs first)."""
    ranked = sorted(candidates, key=lambda c: (c.load, len(c.movers), c.node))
    choice = _greedy(ranked, room, order)
    budget = SEARCH_BUDGET
    for size in range(_most_that_fit(ranked, room), len(choice.nodes), -1):
        for nodes in combinations(ranked, size):
            if budget == 0:
                choice.exhaustive = False
                return choice
            if not _within_totals(nodes, room):
                continue
            budget -= 1
            placed = place(_movers(nodes), room, order)
            choice.exhaustive &= placed.complete
            if placed.nodes is not None:
                return Choice(list(nodes), placed.nodes, choice.exhaustive)
    return choice


def _greedy(ranked: Sequence[Candidate], room: Mapping[str, Resources],
            order: Sequence[str]) -> Choice:
    choice = Choice()
    for candidate in ranked:
        placed = place(_movers([*choice.nodes, candidate]), room, order)
        choice.exhaustive &= placed.complete
        if placed.nodes is not None:
            choice.nodes.append(candidate)
            choice.placement = placed.nodes
    return choice


def _most_that_fit(ranked: Sequence[Candidate], room: Mapping[str, Resources]) -> int:
    """How many candidates the room's totals could take at most: for each resource, the
    count of the smallest candidates' requests that fit in the sum of the free room."""
    most = len(ranked)
    resources = {name for free in room.values() for name in free}
    for resource in resources:
        total = sum(max(free.get(resource, 0), 0) for free in room.values())
        needs = sorted(sum(m.requests.get(resource, 0) for m in c.movers) for c in ranked)
        fitting = 0
        for need in needs:
            if need > total:
                break
            total -= need
            fitting += 1
        most = min(most, fitting)
    return most


def _within_totals(nodes: Sequence[Candidate], room: Mapping[str, Resources]) -> bool:
    """Do the nodes' pods stay within each resource's total free room?"""
    needed: dict[str, int] = {}
    for mover in _movers(nodes):
        for resource, amount in mover.requests.items():
            needed[resource] = needed.get(resource, 0) + amount
    return all(amount <= sum(max(free.get(resource, 0), 0) for free in room.values())
               for resource, amount in needed.items() if amount)


def _movers(nodes: Sequence[Candidate]) -> list[Mover]:
    return [mover for node in nodes for mover in node.movers]
