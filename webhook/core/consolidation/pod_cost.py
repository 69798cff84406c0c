"""The cost a governed pod should carry in its pool: the pool's flat cost, or its node rank.

`pod_cost` is the one decision both pod webhooks and the reconciler ask; the binding
webhook, the reconciler and `plan` share its parts, so that all of them put a pod at the
same place: a pool that does not consolidate gives every pod its `deletionCost`;
one with `consolidate: nodes` gives each pod the value inside its band that
`node_rank.ranked_cost` reads from the pods on its node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..cost.mutation import CostDecision, decide_cost, pinned_pool
from ..objects.kube import annotations_of, name_of, namespace_of, spec_of
from ..policy.policy import Policy
from ..view.cluster import ClusterView
from .node_occupancy import NodeLoad, gpus_offered, occupant_of, owner_of
from .node_rank import ranked_cost


def node_load(policy: Policy, node_name: str, node: Mapping[str, Any] | None,
              pods: Iterable[Mapping[str, Any]]) -> NodeLoad:
    """The node's occupancy from `pods` (those bound to it, in any namespace)."""
    occupants = []
    for pod in pods:
        occupant = occupant_of(pod, policy.gpu_resources)
        if occupant is not None:
            occupants.append(occupant)
    occupants.sort(key=lambda occupant: occupant.ref)
    return NodeLoad(node_name, policy.pool_of_node(node),
                    gpus_offered(node, policy.gpu_resources), tuple(occupants))


def view_node_load(policy: Policy, view: ClusterView, node_name: str,
                   node: Mapping[str, Any] | None) -> NodeLoad:
    """`node_load` from a view's pods on the node, remembered (`read_node`: until a pod
    there changes), so a node is read once, not once per pod."""
    key = (policy.pool_label, policy.gpu_resources, policy.pool_of_node(node),
           gpus_offered(node, policy.gpu_resources))
    return view.read_node(node_name, key, lambda pods: node_load(policy, node_name, node, pods))


def wanted_cost(policy: Policy, pool: str | None, pod: Mapping[str, Any],
                load: NodeLoad | None) -> int:
    """The cost `pod` should carry on a node of `pool` whose occupancy is `load`.

    Without a load (the node's pods are not known) a consolidating pool's pods get the
    band's top: the place of a node this scale-down cannot free, never a cheaper one."""
    found = policy.pool_by_name(pool)
    if found is None:
        return policy.default_deletion_cost
    if not found.consolidates or load is None:
        return found.deletion_cost
    return ranked_cost(found.band, load, owner_of(pod))


def needs_load(policy: Policy, pool: str | None) -> bool:
    """Does a pod's cost in `pool` depend on the pods on its node?"""
    found = policy.pool_by_name(pool)
    return found is not None and found.consolidates


def with_pod(pods: Iterable[Mapping[str, Any]], pod: Mapping[str, Any],
             node_name: str) -> list[Mapping[str, Any]]:
    """`pods` with `pod` as it will be once bound to `node_name` (the binding webhook
    ranks a pod before the cache has seen it there)."""
    ref = (namespace_of(pod), name_of(pod))
    others = [other for other in pods if (namespace_of(other), name_of(other)) != ref]
    spec = dict(pod.get("spec") or {})
    spec["nodeName"] = node_name
    return [*others, {**pod, "spec": spec}]



def cost_at_binding(policy: Policy, pool: str | None, pod: Mapping[str, Any], node_name: str,
                    node: Mapping[str, Any], view: ClusterView) -> int | None:
    """The rank a pod bound to `node_name` gets, read from the view's pods there (a
    watch-fed cache) with the pod added; None when its pool does not consolidate (the
    pool's cost then applies)."""
    if not needs_load(policy, pool):
        return None
    load = node_load(policy, node_name, node,
                     with_pod(view.pods_on_node(node_name), pod, node_name))
    return wanted_cost(policy, pool, pod, load)


def pod_cost(pod: Mapping[str, Any], node: Mapping[str, Any] | None, view: ClusterView | None,
             policy: Policy, at_binding: bool = False, *,
             annotations: Mapping[str, str] | None = None) -> CostDecision | None:
    """The deletion cost decision for a governed `pod` on `node`: what both pod webhooks
    and the reconciler set.

    `node`: the node the pod is on, or binds to `at_binding`; None for a node the view
    does not know (the pool is unknown: a cost set by hand is kept, nothing else set), or
    for a pod not scheduled yet, whose pool is the one it is pinned to (None returned
    when it is pinned to none). `view`: where a consolidating pool's rank reads the pods
    on the node (at binding, with the pod added); None leaves the pool's cost. The
    decision is on the pod's `annotations`, unless others are given (a Binding's,
    which overwrite the pod's).
    """
    annotations = annotations_of(pod) if annotations is None else annotations
    if node is None:
        if spec_of(pod).get("nodeName"):
            return decide_cost(policy, annotations, None, pool_known=False)
        pinned = pinned_pool(policy, pod)
        return None if pinned is None else decide_cost(policy, annotations, pinned)
    pool, node_name = policy.pool_of_node(node), name_of(node)
    cost = None
    if view is not None and at_binding:
        cost = cost_at_binding(policy, pool, pod, node_name, node, view)
    elif view is not None and needs_load(policy, pool):
        cost = wanted_cost(policy, pool, pod, view_node_load(policy, view, node_name, node))
    return decide_cost(policy, annotations, pool, cost=cost)
