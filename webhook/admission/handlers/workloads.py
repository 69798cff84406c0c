"""Workload creates and updates: a pod template's deletion cost checked as the API server would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.kinds.registry import APPS_WORKLOAD_RESOURCES
from ...core.objects.deletion_cost import (
    DELETION_COST_ANNOTATION,
    InvalidDeletionCost,
    check_deletion_cost,
    go_quote,
    is_valid_deletion_cost,
)
from ...core.objects.kube import spec_of
from ..review import AdmissionRequest, BadReview, allow, deny
from .context import Context, Decision, Outcome
from .filters import with_operation_filter, with_subresource_filter
from .reading import check_shape, cost_error, request_object, requested_kind


@with_subresource_filter("")
@with_operation_filter("CREATE", "UPDATE")
def review_workload(request: AdmissionRequest, ctx: Context) -> Decision:
    """Deny a workload whose pod template carries a cost the API server would reject."""
    # The apps/v1 kinds only: the API server validates only its own kinds' pod templates.
    kind = requested_kind(request, APPS_WORKLOAD_RESOURCES)
    if kind is None:
        return Decision(allow(request), Outcome.IGNORED)
    workload = request_object(request, "workload")
    annotations = _template_annotations(workload, "request.object")
    old = request.get("oldObject")
    if isinstance(old, Mapping):
        check_shape(old, "request.oldObject")
        previous = _template_annotations(old, "request.oldObject").get(DELETION_COST_ANNOTATION)
        # As the API server (AllowInvalidPodDeletionCost): an update may keep or change a
        # cost that was already invalid; only a newly invalid value is refused.
        if previous is not None and not is_valid_deletion_cost(str(previous)):
            return Decision(allow(request), Outcome.PREVIOUSLY_INVALID)
    try:
        check_deletion_cost(annotations, "spec.template.annotations")  # as the API server names it
    except InvalidDeletionCost as err:
        name = (workload.get("metadata") or {}).get("name") or request.get("name") or ""
        return Decision(deny(request, 422, "Invalid",
                             f"{kind}.apps {go_quote(name)} is invalid: {cost_error(err)}"),
                        Outcome.INVALID_COST)
    return Decision(allow(request), Outcome.VALID)


def _template_annotations(workload: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    # The shape checks ran before: spec, its template and their metadata are objects or absent.
    template = spec_of(workload).get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    if not isinstance(annotations, Mapping):
        raise BadReview(f"{where}.spec.template.metadata.annotations: must be an object")
    return annotations
