"""A pod as the CloneSet controller reads it, from the facts the core keeps for every pod.

Sources (github.com/openkruise/kruise v1.8.0):
- apis/apps/pub/lifecycle.go: the lifecycle state label and its values;
  pkg/util/lifecycle/lifecycle_utils.go (`GetPodLifecycleState`, `IsPodHooked`).
- apis/apps/v1alpha1/well_known_labels.go: `apps.kruise.io/specified-delete`;
  pkg/util/specifieddelete (`IsSpecifiedDelete`: the label is present, whatever its value).
- pkg/util/revision/revision.go (`IsPodUpdate`, `equalToRevisionHash`): a pod is of the
  update revision when its `controller-revision-hash` equals it, or their last `-` parts do.
- pkg/controller/cloneset/sync/cloneset_sync_utils.go (`IsPodAvailable`, `isPodReady`) and
  core/cloneset_core.go (`IsPodUpdateReady`): available = lifecycle state empty or Normal,
  phase Running, Ready for `minReadySeconds` (k8s podutil.IsPodAvailable) and the
  `InPlaceUpdateReady` condition, when present, True.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..objects.podfacts import PodFacts

LIFECYCLE_STATE_LABEL = "lifecycle.apps.kruise.io/state"
PREPARING_NORMAL = "PreparingNormal"
NORMAL = "Normal"
PREPARING_DELETE = "PreparingDelete"
PREPARING_UPDATE = "PreparingUpdate"
SPECIFIED_DELETE_LABEL = "apps.kruise.io/specified-delete"
REVISION_LABEL = "controller-revision-hash"
IN_PLACE_UPDATE_READY = "InPlaceUpdateReady"
# What this package reads of a pod beyond PodFacts: the live cache keeps it (the registry).
POD_FIELDS = ("metadata.finalizers",)
POD_CONDITIONS = (IN_PLACE_UPDATE_READY,)
_RUNNING = 2  # PodFacts.phase_ordinal of Running
_SECOND_NS = 1_000_000_000


@dataclass(frozen=True)
class PreDeleteHook:
    """`spec.lifecycle.preDelete`: a pod carrying one of these finalizers or labels is
    held in PreparingDelete instead of deleted (`IsPodHooked`)."""

    finalizers: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    mark_pod_not_ready: bool = False

    @classmethod
    def of(cls, hook: Mapping[str, Any] | None) -> PreDeleteHook | None:
        """The hook of a `spec.lifecycle.preDelete` dict, None when absent."""
        if not isinstance(hook, Mapping):
            return None
        labels = hook.get("labelsHandler") or {}
        return cls(tuple(hook.get("finalizersHandler") or ()),
                   tuple((str(k), str(v)) for k, v in labels.items()),
                   bool(hook.get("markPodNotReady")))

    def holds(self, pod: CloneSetPod) -> bool:
        """IsPodHooked: one of the finalizers is on the pod, or one label has its value."""
        return (any(f in pod.finalizers for f in self.finalizers)
                or any(pod.facts.labels.get(k) == v for k, v in self.labels))


class CloneSetPod:
    """One active pod of a CloneSet, with the few fields the CloneSet controller adds to
    what the ReplicaSet ranking reads. `lifecycle` is the only field a simulated sync
    changes (a pod it marks PreparingDelete)."""

    __slots__ = ("facts", "finalizers", "in_place_ready", "lifecycle", "revision",
                 "specified_delete")

    def __init__(self, facts: PodFacts) -> None:
        pod = facts.pod
        metadata = pod.get("metadata") or {}
        labels = facts.labels
        self.facts = facts
        self.lifecycle: str = labels.get(LIFECYCLE_STATE_LABEL, "")
        self.specified_delete = SPECIFIED_DELETE_LABEL in labels
        self.revision: str = labels.get(REVISION_LABEL, "")
        self.finalizers: tuple[str, ...] = tuple(metadata.get("finalizers") or ())
        self.in_place_ready = _in_place_update_ready(pod.get("status") or {})

    def __repr__(self) -> str:
        return f"CloneSetPod({self.facts.name}, {self.lifecycle or '-'})"

    @property
    def name(self) -> str:
        return self.facts.name

    def of_revision(self, revision: str) -> bool:
        """equalToRevisionHash: the same hash, or the same last `-` part."""
        return self.revision == revision or (
            self.revision.rsplit("-", 1)[-1] == revision.rsplit("-", 1)[-1])

    def available(self, min_ready_seconds: int, now_ns: int | None) -> bool:
        """IsPodAvailable: lifecycle Normal (or unset) and IsPodUpdateReady.

        Without a clock (`now_ns` None) a pod Ready since a known time counts as past
        `minReadySeconds`: the state the controller reaches by waiting.
        """
        if self.lifecycle not in ("", NORMAL):
            return False
        facts = self.facts
        if facts.phase_ordinal != _RUNNING or not facts.ready or not self.in_place_ready:
            return False
        if min_ready_seconds <= 0:
            return True
        since = facts.ready_time_ns
        if since is None:
            return False
        return now_ns is None or since + min_ready_seconds * _SECOND_NS < now_ns

    def ready(self) -> bool:
        """isPodReady: IsPodAvailable with minReadySeconds 0 (the deleteReadyLimit's count)."""
        return self.available(0, None)


def _in_place_update_ready(status: Mapping[str, Any]) -> bool:
    """inplaceupdate.GetCondition: the InPlaceUpdateReady condition, when present, is True."""
    conditions: Sequence[Mapping[str, Any]] = status.get("conditions") or ()
    for condition in conditions:
        if condition.get("type") == IN_PLACE_UPDATE_READY:
            return condition.get("status") == "True"
    return True
