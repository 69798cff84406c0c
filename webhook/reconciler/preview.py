"""The costs the reconciler would leave on every governed scheduled pod, without a cluster.

`reconcile --state FILE --dry-run --output json` prints `preview(...)` for a state file:
one entry per pod the policy governs that is bound to a node, in namespace/name order,
with the cost it carries now (`deletionCost`, null when it has none, as the controller
reads it: an invalid value counts as 0) and the cost the reconciler would leave
(`desiredCost`: the pool's cost or the node's rank, or the value a person set, which is
kept).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..core.objects.deletion_cost import DELETION_COST_ANNOTATION, deletion_cost_of
from ..core.objects.kube import annotations_of, name_of, namespace_of, spec_of
from ..core.policy.policy import Policy
from ..core.view.cluster import ClusterView
from .decide import KEPT, SKIPPED, verdict_for

# Pods the preview leaves out: the reconciler never looks at them.
_NOT_LISTED = ("excluded-namespace", "terminating", "finished", "unscheduled", "not-governed")


def preview(view: ClusterView, policy: Policy, excluded_namespaces: Collection[str]
            ) -> dict[str, list[dict[str, Any]]]:
    """`{"pods": [{namespace, name, node, pool, deletionCost, desiredCost}]}`."""
    entries = []
    pods = sorted(view.all_pods(), key=lambda pod: (namespace_of(pod), name_of(pod)))
    for pod in pods:
        verdict = verdict_for(pod, policy, view, excluded_namespaces)
        if verdict.outcome == SKIPPED and verdict.reason in _NOT_LISTED:
            continue
        node_name = spec_of(pod).get("nodeName")
        annotations = annotations_of(pod)
        current = (deletion_cost_of(annotations) if DELETION_COST_ANNOTATION in annotations
                   else None)
        desired = current
        if verdict.outcome != KEPT and verdict.decision is not None:
            desired = verdict.decision.cost
        node = view.node(node_name)
        entries.append({"namespace": namespace_of(pod), "name": name_of(pod),
                        "node": node_name,
                        "pool": policy.pool_of_node(node) if node is not None else None,
                        "deletionCost": current, "desiredCost": desired})
    return {"pods": entries}
