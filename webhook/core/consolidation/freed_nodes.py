"""What a predicted scale-down gives back: the nodes it leaves with no pod holding them.

`plan` reports, for the predicted victims, every node they free (its pool and the GPUs
it offers), the GPUs freed per pool, and the most nodes that the same number of
deletions of this workload could free on the nodes of the victims' pools
(`node_occupancy.best_freed`; other pools are out of reach, as the pool order deletes
from the victims' pools first), so a reader sees how close the controller's choice comes
to the best.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..policy.policy import Policy
from ..view.cluster import ClusterView
from .node_occupancy import NodeLoad, PodRef, best_freed, freed_nodes, owner_of
from .pod_cost import node_load


class Removed(Protocol):
    """A predicted victim (`model.ranked_pod.RankedPod`)."""

    namespace: str
    name: str
    node_name: str
    pod: Mapping[str, Any]


@dataclass(frozen=True)
class FreedNode:
    node: str
    pool: str | None
    gpus: int


@dataclass
class Frees:
    """The nodes `victims` free, GPUs per pool, and the best the same count could free."""

    nodes: list[FreedNode] = field(default_factory=list)
    gpus_by_pool: dict[str, int] = field(default_factory=dict)
    best: int = 0

    def as_json(self) -> dict[str, Any]:
        """The plan document's fields: `freedNodes`, `freedGpus`, `bestFreedNodes`."""
        return {"freedNodes": [{"node": n.node, "pool": n.pool, "gpus": n.gpus}
                               for n in self.nodes],
                "freedGpus": {"total": sum(self.gpus_by_pool.values()),
                              "byPool": dict(self.gpus_by_pool)},
                "bestFreedNodes": self.best}


def what_victims_free(view: ClusterView, policy: Policy, victims: Sequence[Removed],
                      workload_nodes: Sequence[str]) -> Frees:
    """What deleting `victims` frees; `workload_nodes` are the nodes the workload's pods
    are on (where the best choice is looked for)."""
    loads: dict[str, NodeLoad] = {}
    for name in sorted({*workload_nodes, *(v.node_name for v in victims if v.node_name)}):
        loads[name] = node_load(policy, name, view.node(name), view.pods_on_node(name))
    refs: set[PodRef] = {(v.namespace, v.name) for v in victims}
    frees = Frees()
    for load in freed_nodes(loads.values(), refs):
        frees.nodes.append(FreedNode(load.node, load.pool, load.gpus))
        if load.pool is not None or load.gpus:
            key = load.pool or "(none)"
            frees.gpus_by_pool[key] = frees.gpus_by_pool.get(key, 0) + load.gpus
    per_owner: dict[str, int] = {}
    for victim in victims:
        owner = owner_of(victim.pod)
        per_owner[owner] = per_owner.get(owner, 0) + 1
    pools = {loads[v.node_name].pool for v in victims if v.node_name}
    reachable = [load for load in loads.values() if load.pool in pools]
    frees.best = sum(best_freed(reachable, owner, count) for owner, count in per_owner.items())
    return frees
