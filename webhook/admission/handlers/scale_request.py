"""A scale request decoded once from an AdmissionRequest: the core's `ScaleRequest`.

A scale of a workload reaches the webhooks as an UPDATE of its `scale` subresource (an
autoscaling/v1 Scale) or of the workload itself (a GitOps sync, `kubectl apply`); either
way the request's objects are checked for shape here and only the counts, the requester
and the workload travel on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.objects.deletion_cost import INT32_MAX
from ...core.objects.kube import spec_of
from ...core.scale.answer import ScaleRequest
from ..review import AdmissionRequest, BadReview
from .filters import username_of
from .reading import check_shape, request_object, requested_kind


def decode_scale(request: AdmissionRequest) -> ScaleRequest:
    """The scale `request` asks for. Raises BadReview when an object poolguard reads is
    malformed."""
    new, old = request_object(request, "scale"), request.get("oldObject")
    return _decoded(request, new, old if isinstance(old, Mapping) else None)


def decode_update(request: AdmissionRequest) -> ScaleRequest | None:
    """`decode_scale` of a request with its old object (an UPDATE always carries it), else
    None."""
    new, old = request_object(request, "scale"), request.get("oldObject")
    return _decoded(request, new, old) if isinstance(old, Mapping) else None


def _decoded(request: AdmissionRequest, new: Mapping[str, Any],
             old: Mapping[str, Any] | None) -> ScaleRequest:
    if old is not None:
        check_shape(old, "request.oldObject")
    to_replicas = _replicas(new, "request.object")
    from_replicas = _replicas(old, "request.oldObject") if old is not None else None
    own_object = (request.get("subResource") or "") == ""  # not its Scale
    return ScaleRequest(kind=requested_kind(request) or "",
                        namespace=request.get("namespace") or "",
                        name=request.get("name") or "", to_replicas=to_replicas,
                        from_replicas=from_replicas, username=username_of(request),
                        workload=old if own_object else None)


def _replicas(obj: Any, where: str) -> int:
    value = spec_of(obj).get("replicas") if isinstance(obj, Mapping) else None
    if value is None:
        # autoscaling/v1 Scale omits replicas when it is 0; workloads default it to 1
        return 0 if isinstance(obj, Mapping) and obj.get("kind") == "Scale" else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadReview(f"{where}.spec.replicas: must be a non-negative integer")
    if value > INT32_MAX:  # the API server keeps an int32: not a review it would send
        raise BadReview(f"{where}.spec.replicas: {value} is more than the int32 maximum "
                        f"{INT32_MAX}")
    return value
