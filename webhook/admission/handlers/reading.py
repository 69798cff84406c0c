"""Reading an AdmissionReview's request: its resource, its objects checked for shape."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...core.kinds.registry import WORKLOAD_RESOURCES, workload_kind
from ...core.objects.deletion_cost import InvalidDeletionCost, invalid_cost_message
from ...core.objects.shape import ShapeError, check_object_shape
from ..review import ECHO_LIMIT, AdmissionRequest, BadReview


def request_object(request: AdmissionRequest, what: str,
            check: Callable[[Mapping[str, Any], str], None] = check_object_shape,
            ) -> Mapping[str, Any]:
    """`request.object`, with the fields poolguard reads checked for their shape."""
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        raise BadReview(f"request.object: missing; a {what} review needs the object")
    check_shape(obj, "request.object", check)
    return obj


def check_shape(obj: Mapping[str, Any], where: str,
                 check: Callable[[Mapping[str, Any], str], None] = check_object_shape) -> None:
    try:
        check(obj, where)
    except ShapeError as err:
        raise BadReview(str(err)) from None
    metadata = obj.get("metadata") or {}
    for key in ("name", "generateName", "namespace"):  # read for messages and lookups
        if metadata.get(key) is not None and not isinstance(metadata[key], str):
            raise BadReview(f"{where}.metadata.{key}: must be a string")


def requested_kind(request: AdmissionRequest,
                   kinds: Mapping[tuple[str, str], str] = WORKLOAD_RESOURCES) -> str | None:
    """The workload kind the request's resource (API group and plural) names, or None."""
    resource = request.get("resource") or {}
    return workload_kind(resource.get("group"), resource.get("resource"), kinds)


def cost_error(err: InvalidDeletionCost) -> str:
    """The API server's wording, with at most a short prefix of the offending value."""
    value = err.value if len(err.value) <= ECHO_LIMIT else err.value[:ECHO_LIMIT] + "..."
    return invalid_cost_message(value, err.field_path)
