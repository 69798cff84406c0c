"""The victims of a scale, whatever the kind: the kind's own predictor, from the registry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..kinds.registry import kind_of_object
from ..model.burst_replicas import BURST_REPLICAS
from ..model.prediction import ScalePrediction
from ..view.cluster import ClusterView


def predict_scale(
    view: ClusterView,
    workload: Mapping[str, Any],
    to_replicas: int,
    now_ns: int | None,
    burst: int = BURST_REPLICAS,
) -> ScalePrediction:
    """Predict the victims of setting `workload`'s replicas to `to_replicas`."""
    if to_replicas < 0:
        raise ValueError(f"replicas must be 0 or more, got {to_replicas}")
    kind = kind_of_object(workload)
    if kind is None:
        raise ValueError(f"cannot predict a scale of kind {workload.get('kind')!r}")
    return kind.predict(view, workload, to_replicas, now_ns, burst)
