"""A pod ranked for one prediction: its facts, its rank by related pods on its node.

Kubernetes ranks the pods a controller may delete in pkg/controller/controller_utils.go
(`ActivePodsWithRanks`), above the per-controller packages; every kind's predictor here
ranks its pods as `RankedPod`s and the judge reads them, whatever the kind. The comparator
that orders them is the ReplicaSet controller's port (replicaset/active_pods_with_ranks.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from ..objects.podfacts import PodFacts, bucket_window

_RANKED_DEFAULTS: dict[str, Any] = {"key": 0, "replica_set": "", "_buckets": None}


class RankedPod:
    """A pod's facts plus what one prediction adds: its rank and its sort key.

    The facts are shared and read-only; rank, keys and ReplicaSet belong to this
    prediction alone.
    """

    __slots__ = ("_buckets", "facts", "key", "less", "live", "rank", "replica_set", "sync")

    def __init__(self, facts: PodFacts, rank: int = 0) -> None:
        # Set here: the facts and the rank. Set before they are read: `key` (rules 1-8 as
        # an integer, see podfacts) when sorted, `replica_set` (the owning ReplicaSet) by
        # the prediction; unset ones read as their defaults (__getattr__).
        self.facts = facts
        self.rank = rank
        self.sync = 0  # replicaset_sync.GONE once deleted by a simulated sync
        # Its stand-in in a comparator sort against this prediction's clock
        # (`sort_keys.Less`).
        self.less: Any = None

    def __getattr__(self, name: str) -> Any:
        if name in _RANKED_DEFAULTS:
            return _RANKED_DEFAULTS[name]
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"RankedPod({self.facts.namespace}/{self.facts.name}, rank={self.rank})"

    # The facts, read through (attrgetter: C speed).
    pod = property(attrgetter("facts.pod"), doc="The pod object the facts came from.")
    name = property(attrgetter("facts.name"))
    namespace = property(attrgetter("facts.namespace"))
    uid = property(attrgetter("facts.uid"))
    node_name = property(attrgetter("facts.node_name"))
    phase_ordinal = property(attrgetter("facts.phase_ordinal"))
    ready = property(attrgetter("facts.ready"))
    deletion_cost = property(attrgetter("facts.deletion_cost"))
    ready_time_ns = property(attrgetter("facts.ready_time_ns"))
    restarts = property(attrgetter("facts.restarts"))
    sidecar_restarts = property(attrgetter("facts.sidecar_restarts"))
    created_ns = property(attrgetter("facts.created_ns"))

    @property
    def key_rules_1_to_5(self) -> tuple[bool, int, bool, int, int]:
        """Rules 1-5 as a key, smaller first: unscheduled, phase, not ready, cost, more related."""
        facts = self.facts
        return (bool(facts.node_name), facts.phase_ordinal, facts.ready, facts.deletion_cost,
                -self.rank)

    def buckets(self, now_ns: int | None) -> tuple[int, int]:
        """(ready bucket, creation bucket) against `now_ns`, remembered for the last clock."""
        cached = self._buckets
        if cached is None or cached[0] != now_ns:
            cached = (now_ns, log_bucket(self.facts.ready_time_ns, now_ns),
                      log_bucket(self.facts.created_ns, now_ns))
            self._buckets = cached
        return cached[1], cached[2]


def ranked_pod(pod: Mapping[str, Any] | PodFacts, rank: int) -> RankedPod:
    """A pod (dict or facts) with its rank; its sort key is set when a set of pods is sorted."""
    return RankedPod(pod if isinstance(pod, PodFacts) else PodFacts(pod), rank)


def log_bucket(time_ns: int | None, now_ns: int | None) -> int:
    """int(log2(now - t)) in nanoseconds as logarithmicRankDiff computes it; -1 if not positive."""
    if time_ns is None or now_ns is None:
        return -1
    return bucket_window(time_ns, now_ns)[0]

