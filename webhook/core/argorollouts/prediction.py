"""A Rollout's scale predicted as a ScalePrediction (see `argo_rollout`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model.prediction import ScalePrediction, empty_prediction
from ..replicaset.prediction import invalid_cost_notes
from ..view.cluster import ClusterView
from .argo_rollout import predict_rollout


def predict_rollout_scale(view: ClusterView, rollout: Mapping[str, Any], to_replicas: int,
                          now_ns: int | None, burst: int) -> ScalePrediction:
    """The victims of setting the Rollout's `spec.replicas` to `to_replicas`."""
    prediction = empty_prediction(rollout, to_replicas)
    predict_rollout(view, rollout, to_replicas, now_ns, burst, into=prediction)
    prediction.notes.extend(invalid_cost_notes(prediction.victims + prediction.survivors))
    return prediction
