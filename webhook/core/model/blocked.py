"""A pod a scale-down removes only once its controller stops waiting, and what it waits on.

The StatefulSet controller under OrderedReady (pkg/controller/statefulset) waits on a pod
before it deletes the next; the kinds built on it (a LeaderWorkerSet's leaders, a
CloneSet's specified pods) produce the same record, and the judge reads it whatever the
kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ranked_pod import RankedPod


@dataclass(frozen=True)
class Wait:
    """A condemned pod is deleted only once `on` (a pod name) lets the controller go on."""

    on: str
    reason: str
    in_new_range: bool = False  # `on` is a pod the scale-down keeps


@dataclass
class Blocked:
    """A pod the scale-down removes only after the controller stops waiting (`wait`)."""

    pod: RankedPod
    wait: Wait

    @property
    def waiting_on(self) -> str:
        """The pod the controller waits on."""
        return self.wait.on
