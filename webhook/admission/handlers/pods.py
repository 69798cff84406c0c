"""Pod creates and bindings: the deletion cost set as the pod is created or scheduled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.consolidation.pod_cost import pod_cost
from ...core.cost.mutation import SET, annotation_patch, is_governed
from ...core.objects.deletion_cost import InvalidDeletionCost, check_deletion_cost, go_quote
from ...core.objects.kube import annotations_of, labels_of, spec_of
from ...core.objects.shape import check_placement_shape
from ..review import AdmissionRequest, BadReview, allow, deny, with_patch
from .context import Context, Decision, Outcome
from .filters import with_operation_filter, with_resource_filter, with_subresource_filter
from .reading import cost_error, request_object


@with_resource_filter("pods")
@with_subresource_filter("")
@with_operation_filter("CREATE")
def review_pod_create(request: AdmissionRequest, ctx: Context) -> Decision:
    """Validate an explicit cost; inject the pool's cost when the pool is already known."""
    pod = request_object(request, "pod", check_placement_shape)  # the hot path reads only these
    try:
        check_deletion_cost(annotations_of(pod))
    except InvalidDeletionCost as err:
        name = go_quote(_pod_name(pod, request))
        return Decision(deny(request, 422, "Invalid", f"Pod {name} is invalid: {cost_error(err)}"),
                        Outcome.INVALID_COST)
    namespace = request.get("namespace") or (pod.get("metadata") or {}).get("namespace") or ""
    if not is_governed(ctx.policy, ctx.view.namespace_labels(namespace), labels_of(pod)):
        return Decision(allow(request), Outcome.NOT_GOVERNED)
    node_name = spec_of(pod).get("nodeName")
    node = ctx.view.node(node_name) if node_name else None
    if node_name and node is None:
        return Decision(allow(request), Outcome.NODE_UNKNOWN)
    # Not ranked here (the node's pods are not read on this hot path): the reconciler
    # ranks a pod created on a consolidating pool's node.
    decision = pod_cost(pod, node, None, ctx.policy)
    if decision is None:
        return Decision(allow(request), Outcome.POOL_UNKNOWN)  # the binding webhook sets it
    outcome = Outcome(decision.action)
    if decision.action != SET:
        return Decision(allow(request), outcome)
    return Decision(with_patch(request, annotation_patch(pod, decision.annotations,
                                                         decision.stale)), outcome)


def _pod_name(pod: Mapping[str, Any], request: AdmissionRequest) -> str:
    metadata = pod.get("metadata") or {}
    return metadata.get("name") or request.get("name") or metadata.get("generateName") or ""


@with_resource_filter("pods")
@with_subresource_filter("binding")
@with_operation_filter("CREATE")
def review_binding(request: AdmissionRequest, ctx: Context) -> Decision:
    """Add the target node's pool cost (or, in a consolidating pool, the node's rank from
    the cached pods there) to the Binding; the API server copies it to the pod."""
    binding = request_object(request, "binding", check_placement_shape)
    target = binding.get("target")
    if not isinstance(target, Mapping) or not isinstance(target.get("name"), str):
        raise BadReview("request.object.target.name: a Binding needs its target node")
    namespace = request.get("namespace") or ""
    pod_name = request.get("name") or (binding.get("metadata") or {}).get("name") or ""
    pod = (ctx.find_pod or ctx.view.pod)(namespace, pod_name)
    if pod is None:  # the reconciler sets the cost once it sees the pod
        return Decision(allow(request), Outcome.POD_UNKNOWN)
    if not is_governed(ctx.policy, ctx.view.namespace_labels(namespace), labels_of(pod)):
        return Decision(allow(request), Outcome.NOT_GOVERNED)
    node = ctx.view.node(target["name"])
    if node is None:
        return Decision(allow(request), Outcome.NODE_UNKNOWN)
    # The Binding's annotations overwrite the pod's, so decide on both together.
    merged = {**annotations_of(pod), **annotations_of(binding)}
    decision = pod_cost(pod, node, ctx.view, ctx.policy, at_binding=True, annotations=merged)
    assert decision is not None  # a known node's pool is known
    outcome = Outcome(decision.action)
    if decision.action != SET:
        return Decision(allow(request), outcome)
    return Decision(with_patch(request, annotation_patch(binding, decision.annotations)), outcome)
