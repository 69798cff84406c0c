"""The rebalance plan: which overflow pods go home so that whole nodes go back to training.

Reads the view once: the protected pools' nodes are the room (`room`), the unprotected
pools' GPU pods are classified (`overflow_pods`), a node whose every GPU pod may move is
a candidate, and `node_choice` picks the candidates to empty. Every GPU pod of an
unprotected pool that does not move is reported with the reason it stays.

The document (`RebalancePlan.as_json`) is what `rebalance --dry-run --output json`
prints: `moves`, `freedNodes` and `skipped`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...objects.kube import name_of, namespace_of
from ...policy.policy import Policy
from ...view.cluster import ClusterView
from ..freed_nodes import FreedNode
from ..pod_cost import node_load
from .node_choice import Candidate, Choice, choose_nodes
from .overflow_pods import Classifier, Mover, Stayer, TargetNode
from .resource_requests import CPU, MEMORY, PODS
from .room import free_room


@dataclass(frozen=True)
class Move:
    """One pod to evict, so that its replacement lands in `to_pool`."""

    mover: Mover
    lands_on: str  # the node of `to_pool` the plan found room on (the scheduler decides)


@dataclass
class RebalancePlan:
    """The moves, the nodes they free, and every unprotected GPU pod that stays."""

    moves: list[Move] = field(default_factory=list)
    freed: list[FreedNode] = field(default_factory=list)
    skipped: list[Stayer] = field(default_factory=list)
    exhaustive: bool = True  # False: the node search stopped at its budget

    def as_json(self) -> dict[str, Any]:
        """`{"moves": [...], "freedNodes": [...], "skipped": [...]}`."""
        return {
            "moves": [{"namespace": m.mover.namespace, "name": m.mover.name,
                       "workload": m.mover.workload, "node": m.mover.node,
                       "pool": m.mover.pool, "toPool": m.mover.to_pool,
                       "gpus": m.mover.gpus} for m in self.moves],
            "freedNodes": [{"node": n.node, "pool": n.pool, "gpus": n.gpus}
                           for n in self.freed],
            "skipped": [{"namespace": s.namespace, "name": s.name, "reason": s.reason}
                        for s in self.skipped],
        }


def plan_rebalance(view: ClusterView, policy: Policy,
                   held: Mapping[str, str] | None = None) -> RebalancePlan:
    """The rebalance plan for the cluster `view` holds, under `policy`; the workloads in
    `held` (ref -> why) do not move."""
    nodes = sorted(view.nodes(), key=name_of)
    targets = [TargetNode(name_of(n), policy.pool_of_node(n) or "", n) for n in nodes
               if policy.is_protected(policy.pool_of_node(n))]
    order = (*policy.gpu_resources, CPU, MEMORY, PODS)
    room = free_room(targets, view.pods_on_node, order)
    classifier = Classifier(view, policy, targets, held)
    candidates: list[Candidate] = []
    plan = RebalancePlan()
    for node in nodes:
        pool = policy.pool_of_node(node)
        if policy.pool_by_name(pool) is None or policy.is_protected(pool):
            continue
        candidate, stayers = _read_node(view, policy, classifier, node, pool or "")
        if candidate is not None:
            candidates.append(candidate)
        plan.skipped += stayers
    choice = choose_nodes(candidates, room, order)
    _record_choice(plan, choice, candidates)
    return plan


def _read_node(view: ClusterView, policy: Policy, classifier: Classifier,
               node: Mapping[str, Any], pool: str
               ) -> tuple[Candidate | None, list[Stayer]]:
    """(the node as a candidate, or None; the pods on it that stay)."""
    name = name_of(node)
    pods = {(namespace_of(p), name_of(p)): p for p in view.pods_on_node(name)}
    load = node_load(policy, name, node, pods.values())
    holders = [o for o in load.occupants if load.holds(o)]
    movers: list[Mover] = []
    stayers: list[Stayer] = []
    for occupant in holders:
        found = classifier.classify(pods[occupant.ref], name, pool, occupant.gpus)
        if isinstance(found, Mover):
            movers.append(found)
        else:
            stayers.append(found)
    if not movers:
        return None, stayers
    if stayers:
        kept = stayers[0]
        others = f" and {len(stayers) - 1} more" if len(stayers) > 1 else ""
        stayers += [Stayer(m.namespace, m.name, name,
                           f"node {name} would not be freed: its pod {kept.namespace}/"
                           f"{kept.name}{others} stays ({kept.reason})") for m in movers]
        return None, stayers
    return Candidate(name, load.pool, load.gpus, tuple(movers)), stayers


def _record_choice(plan: RebalancePlan, choice: Choice,
                   candidates: Sequence[Candidate]) -> None:
    chosen = {candidate.node for candidate in choice.nodes}
    plan.exhaustive = choice.exhaustive
    for candidate in choice.nodes:
        plan.freed.append(FreedNode(candidate.node, candidate.pool, candidate.gpus))
        plan.moves += [Move(m, choice.placement[m.ref]) for m in candidate.movers]
    pools = sorted({m.to_pool for c in candidates for m in c.movers})
    for candidate in candidates:
        if candidate.node in chosen:
            continue
        why = (f"node {candidate.node} is not emptied: {' and '.join(pools)} has no room "
               f"for its {len(candidate.movers)} GPU pods ({candidate.load} GPUs)"
               + (f" beside the {len(chosen)} nodes chosen" if chosen else ""))
        plan.skipped += [Stayer(m.namespace, m.name, candidate.node, why)
                         for m in candidate.movers]
    plan.freed.sort(key=lambda n: n.node)
    plan.moves.sort(key=lambda m: (m.mover.node, m.mover.namespace, m.mover.name))
    plan.skipped.sort(key=lambda s: (s.node, s.namespace, s.name))
