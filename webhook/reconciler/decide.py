"""What a pod needs from the reconciler, decided from a cached view (pure: no I/O).

The cost itself is the webhooks' decision (`webhook.core.consolidation.pod_cost.pod_cost`):
a governed, scheduled pod on a known node gets its pool's cost, or in a pool that
consolidates its node's rank (read from the pods on the node); a value a person set (no
poolguard marker, or a marker that no longer matches) is kept. This module adds only what
the reconciler rules out before asking (pods it never touches, and why) and which
of poolguard's annotations `--cleanup` removes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from ..core.consolidation.pod_cost import pod_cost
from ..core.cost.mutation import KEEP, SET, UNCHANGED, CostDecision, is_governed
from ..core.objects.deletion_cost import (
    DELETION_COST_ANNOTATION,
    MANAGED_COST_ANNOTATION,
    POOL_ANNOTATION,
    cost_set_by_hand,
)
from ..core.objects.kube import (
    Obj,
    annotations_of,
    labels_of,
    meta,
    namespace_of,
    spec_of,
    status_of,
)
from ..core.policy.policy import Policy
from ..core.view.cluster import ClusterView

PodKey = tuple[str, str]  # (namespace, name)

# What happened to a pod: the words of the summary line and the `outcome` label of
# poolguard_reconciler_pods. A verdict is PATCH, UNCHANGED_POD, KEPT or SKIPPED; the
# writer turns PATCH into PATCHED or FAILED, and cleanup reports CLEANED or UNTOUCHED.
PATCH = "patch"
PATCHED = "patched"
UNCHANGED_POD = "unchanged"
KEPT = "kept"
SKIPPED = "skipped"
FAILED = "failed"
CLEANED = "cleaned"
UNTOUCHED = "untouched"
WRITE_REASONS = ("new", "pool", "rank")  # see write_reason


@dataclass(frozen=True)
class PodNeed:
    """What a pod needs: PATCH (with the decision), or nothing and why."""

    outcome: str  # PATCH, UNCHANGED_POD, KEPT or SKIPPED
    reason: str = ""  # why a pod is SKIPPED, e.g. "unscheduled"
    decision: CostDecision | None = None


def verdict_for(pod: Obj, policy: Policy, view: ClusterView,
                excluded_namespaces: Collection[str]) -> PodNeed:
    """What `pod` needs under `policy`, with its node and namespace read from `view`."""
    skip = skip_reason(pod, policy, view, excluded_namespaces)
    if skip:
        return PodNeed(SKIPPED, skip)
    decision = pod_cost(pod, view.node(spec_of(pod).get("nodeName")), view, policy)
    assert decision is not None  # a scheduled pod's pool is its node's, known or not
    if decision.action == SET:
        return PodNeed(PATCH, decision=decision)
    if decision.action == UNCHANGED:
        return PodNeed(UNCHANGED_POD, decision=decision)
    if decision.action == KEEP:
        return PodNeed(KEPT)
    return PodNeed(SKIPPED, "unknown-node")


def write_reason(pod: Obj, decision: CostDecision) -> str:
    """Why a PATCH writes: `new` (no cost of poolguard's yet), `pool` (the node's pool
    changed, or the policy's cost for it), or `rank` (same pool, the node's rank moved)."""
    annotations = annotations_of(pod)
    if MANAGED_COST_ANNOTATION not in annotations:
        return "new"
    if annotations.get(POOL_ANNOTATION) != decision.pool or decision.cost is None:
        return "pool"
    return "rank"


def skip_reason(pod: Obj, policy: Policy, view: ClusterView,
                excluded_namespaces: Collection[str]) -> str:
    """Why the reconciler leaves `pod` alone whatever it carries, or "" if it does not."""
    namespace = namespace_of(pod)
    if namespace in excluded_namespaces:
        return "excluded-namespace"
    if meta(pod).get("deletionTimestamp"):
        return "terminating"
    if status_of(pod).get("phase") in ("Succeeded", "Failed"):
        return "finished"
    if not spec_of(pod).get("nodeName"):
        return "unscheduled"
    if not is_governed(policy, view.namespace_labels(namespace), labels_of(pod)):
        return "not-governed"
    return ""


def owned_keys(annotations: Mapping[str, str]) -> list[str]:
    """The annotations cleanup removes: the marker and pool, and the cost only where
    the marker still matches it (otherwise a person set the cost: it stays)."""
    keys = []
    if DELETION_COST_ANNOTATION in annotations and not cost_set_by_hand(annotations):
        keys.append(DELETION_COST_ANNOTATION)
    keys += [k for k in (MANAGED_COST_ANNOTATION, POOL_ANNOTATION) if k in annotations]
    return keys
