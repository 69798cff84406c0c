"""What a CloneSet's spec and status give its scale sync, read once from the object.

Sources (github.com/openkruise/kruise v1.8.0): apis/apps/v1alpha1/cloneset_types.go
(`DefaultCloneSetMaxUnavailable` "20%", `CloneSetScalingExcludePreparingDeleteKey`),
pkg/util/tools.go (`CalculatePartitionReplicas`), pkg/features/kruise_features.go (the
gates `CloneSetPartitionRollback` and `PreparingUpdateAsUpdate`, both off by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..objects.intstr import scaled_int_or_percent
from ..objects.kube import labels_of, spec_of, status_of
from .cloneset_pod import PreDeleteHook

DEFAULT_MAX_UNAVAILABLE = "20%"
EXCLUDE_PREPARING_DELETE_LABEL = "apps.kruise.io/cloneset-scaling-exclude-preparing-delete"
_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True)
class CloneSetSpec:
    """The fields `calculateDiffsWithExpectation` and `Scale` read, as given (int or
    percent strings); `partition`, `max_surge` and friends scale them against `replicas`."""

    replicas: int
    partition_value: int | str | None = None
    max_surge_value: int | str | None = None
    max_unavailable_value: int | str | None = None
    scale_max_unavailable_value: int | str | None = None
    paused: bool = False
    min_ready_seconds: int = 0
    pods_to_delete: frozenset[str] = frozenset()
    pre_delete: PreDeleteHook | None = None
    mark_pod_not_ready: bool = False  # IsLifecycleMarkPodNotReady (preDelete or inPlaceUpdate)
    exclude_preparing_delete: bool = False
    spread_constraints: bool = False  # the template has topologySpreadConstraints
    update_revision: str = ""
    current_revision: str = ""
    partition_rollback: bool = False  # feature gate CloneSetPartitionRollback
    preparing_update_as_update: bool = False  # feature gate PreparingUpdateAsUpdate

    @classmethod
    def of(cls, cloneset: Mapping[str, Any]) -> CloneSetSpec:
        """The spec of a CloneSet object (`spec.replicas` absent reads as 1, the API default)."""
        spec, status = spec_of(cloneset), status_of(cloneset)
        update = spec.get("updateStrategy") or {}
        scale = spec.get("scaleStrategy") or {}
        lifecycle = spec.get("lifecycle") or {}
        template_spec = (spec.get("template") or {}).get("spec") or {}
        pre_delete = PreDeleteHook.of(lifecycle.get("preDelete"))
        in_place = lifecycle.get("inPlaceUpdate") or {}
        replicas = spec.get("replicas")
        return cls(
            replicas=1 if replicas is None else int(replicas),
            partition_value=update.get("partition"),
            max_surge_value=update.get("maxSurge"),
            max_unavailable_value=update.get("maxUnavailable"),
            scale_max_unavailable_value=scale.get("maxUnavailable"),
            paused=bool(update.get("paused")),
            min_ready_seconds=int(spec.get("minReadySeconds") or 0),
            pods_to_delete=frozenset(scale.get("podsToDelete") or ()),
            pre_delete=pre_delete,
            mark_pod_not_ready=bool((pre_delete and pre_delete.mark_pod_not_ready)
                                    or in_place.get("markPodNotReady")),
            exclude_preparing_delete=(
                labels_of(cloneset).get(EXCLUDE_PREPARING_DELETE_LABEL) == "true"),
            spread_constraints=bool(template_spec.get("topologySpreadConstraints")),
            update_revision=status.get("updateRevision") or "",
            current_revision=status.get("currentRevision") or "",
        )

    def scaled_to(self, replicas: int) -> CloneSetSpec:
        """The same CloneSet with `spec.replicas` set to `replicas`."""
        return replace(self, replicas=replicas)

    @property
    def partition(self) -> int:
        """CalculatePartitionReplicas: percent rounded up, at least one pod updated when a
        percent below 100% would keep them all, within [0, replicas]."""
        if self.partition_value is None:
            return 0
        value = _scaled(self.partition_value, self.replicas, True)
        if (self.replicas > 1 and value == self.replicas
                and isinstance(self.partition_value, str) and self.partition_value != "100%"):
            value = self.replicas - 1
        return max(min(value, self.replicas), 0)

    @property
    def max_surge(self) -> int:
        """maxSurge, rounded up; 0 while the update is paused."""
        if self.max_surge_value is None or self.paused:
            return 0
        return _scaled(self.max_surge_value, self.replicas, True)

    @property
    def max_unavailable(self) -> int:
        """updateStrategy.maxUnavailable (default 20%), rounded up only without a surge."""
        value = (DEFAULT_MAX_UNAVAILABLE if self.max_unavailable_value is None
                 else self.max_unavailable_value)
        return _scaled(value, self.replicas, self.max_surge == 0)

    @property
    def scale_max_unavailable(self) -> int:
        """scaleStrategy.maxUnavailable (limits only scale-ups), MaxInt32 when unset."""
        if self.scale_max_unavailable_value is None:
            return _MAX_INT32
        return _scaled(self.scale_max_unavailable_value, self.replicas, True)


def _scaled(value: int | str, total: int, round_up: bool) -> int:
    """GetValueFromIntOrPercent as the controller calls it: a value it cannot read counts
    as 0 (it drops the error; the CloneSet webhook refuses such values at the door)."""
    try:
        return scaled_int_or_percent(value, total, round_up)
    except ValueError:
        return 0
