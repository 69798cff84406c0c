"""What a scale's prediction says: the victims, the survivors, the pods that wait.

Each controller's package predicts its own kind (replicaset/prediction.py,
deployment/prediction.py, ...) as this one type; the judge (scale/) reads it, whatever
the kind, and picks the kind's predictor from the registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..objects.kube import name_of, namespace_of, replicas_of
from .blocked import Blocked
from .ranked_pod import RankedPod
from .tie_group import TieGroup, possible_victims
from .units import ReplicaUnit


class PrefixChain(Protocol):
    """Along a prediction's `prefix_order`, what every chain of syncs can delete (a
    ReplicaSet's BurstReplicas syncs: replicaset/chain_bound.py)."""

    @property
    def per_node(self) -> Mapping[str, int]:
        """Related active pods per node before the scale-down: a node's rank."""
        ...

    def cut(self, removed: int) -> tuple[int, int, int] | None:
        """(start, end, lowest rank) of the pods in doubt when the first `removed` of the
        order go; None when every chain deletes the same pods."""
        ...




@dataclass
class ScalePrediction:
    """What the controllers will delete when a workload goes to `to_replicas`."""

    kind: str
    namespace: str
    name: str
    from_replicas: int
    to_replicas: int
    victims: list[RankedPod] = field(default_factory=list)  # deleted without waiting
    survivors: list[RankedPod] = field(default_factory=list)
    # Pods the scale-down deletes only once the controller stops waiting (StatefulSets
    # under OrderedReady); the end state loses them too, the stalled state keeps them.
    blocked: list[Blocked] = field(default_factory=list)
    tie_groups: list[TieGroup] = field(default_factory=list)
    order: list[RankedPod] | None = None
    # The children whose replicas the workload's controller writes (a Deployment's
    # ReplicaSets), by name: (from, to).
    child_targets: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Why a victim goes, by pod name, where the kind's controller says it better than the
    # ranking does (a group's leader and workers).
    reasons: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # One order whose every prefix is the victim set of a smaller target, when that holds
    # (one ReplicaSet or StatefulSet shrinks; syncs replay identically up to a smaller
    # cut); None during a rollout, where the split between ReplicaSets moves.
    prefix_order: list[RankedPod] | None = None
    # Along `prefix_order`, what every chain of syncs can delete (scale-downs larger than
    # one sync); None for StatefulSets, which delete by ordinal.
    prefix_chain: PrefixChain | None = None
    # Kinds whose replica is a group of pods that goes whole (the kind's `unit`): every
    # unit with its fate, highest index first; None when a replica is one pod.
    units: list[ReplicaUnit] | None = None
    pods_per_replica: int = 1  # the pods of one unit
    # Pods of the units that their controller does not create yet (a LeaderWorkerSet
    # group's workers while its leader is not ready under startupPolicy LeaderReady).
    pods_not_created: int = 0

    @property
    def possible_victims(self) -> list[RankedPod]:
        """Survivors that might be removed instead of a predicted victim."""
        return possible_victims(self.victims, self.tie_groups)


def empty_prediction(workload: Mapping[str, Any], to_replicas: int) -> ScalePrediction:
    return ScalePrediction(
        kind=workload.get("kind") or "",
        namespace=namespace_of(workload),
        name=name_of(workload),
        from_replicas=replicas_of(workload),
        to_replicas=to_replicas,
    )
