"""The unit of a replica, for kinds whose replica is a group of pods that goes whole.

A ReplicaSet's replica is one pod; a LeaderWorkerSet's is a group (a leader and its
workers), removed whole. A predictor of such a kind describes each unit with its fate, so
that the judgement (the safe count in units) and plan's rendering (one table of units)
read no kind's own types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .ranked_pod import RankedPod

# A unit's fate, as plan names a pod's.
VICTIM, BLOCKED, SURVIVES = "victim", "blocked", "survives"
# A unit that a rolling update under way may delete and recreate: it might go at any count.
POSSIBLE_VICTIM = "possible-victim"


class ReplicaUnit(Protocol):
    """One replica's pods, which go together: `head` is the pod the others hang on."""

    @property
    def index(self) -> int:
        """Its index among the workload's units (the highest go first)."""
        ...

    @property
    def fate(self) -> str:
        """VICTIM, BLOCKED, SURVIVES or POSSIBLE_VICTIM."""
        ...

    @property
    def head(self) -> RankedPod | None:
        """The pod the others hang on (a leader), when it exists."""
        ...

    @property
    def rest(self) -> list[RankedPod]:
        """The other pods (workers)."""
        ...

    @property
    def pods(self) -> list[RankedPod]:
        """The head first, then the rest."""
        ...
