"""What deletion cost a pod should carry, and the JSON Patch that sets it without loss.

Shared by the mutating webhook (pod create, pods/binding) and the reconciler, so both
make the same decision: governed pods on a known pool get the pool's cost; a value
someone else set (no poolguard marker, or a marker that no longer matches) is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..objects.deletion_cost import (
    DELETION_COST_ANNOTATION,
    MANAGED_COST_ANNOTATION,
    POOL_ANNOTATION,
    cost_set_by_hand,
    format_deletion_cost,
)
from ..objects.kube import annotations_of, spec_of
from ..objects.selectors import selector_matches
from ..policy.policy import Policy

SET = "set"          # write the cost
UNCHANGED = "unchanged"  # already carries exactly what poolguard would write
KEEP = "keep"        # someone else's value: never touched
UNKNOWN_POOL = "unknown-pool"  # the node is not known yet
SKIP_LABEL = "poolguard.dev/skip"  # break-glass: "true" takes one object out of scope


@dataclass(frozen=True)
class CostDecision:
    action: str
    pool: str | None = None
    cost: int | None = None

    @property
    def annotations(self) -> dict[str, str]:
        """The annotations poolguard writes for a SET decision."""
        if self.cost is None:
            return {}
        managed = {DELETION_COST_ANNOTATION: format_deletion_cost(self.cost),
                   MANAGED_COST_ANNOTATION: format_deletion_cost(self.cost)}
        if self.pool is not None:
            managed[POOL_ANNOTATION] = self.pool
        return managed

    @property
    def stale(self) -> tuple[str, ...]:
        """Annotations poolguard set earlier that a SET decision removes."""
        return (POOL_ANNOTATION,) if self.cost is not None and self.pool is None else ()


def is_governed(policy: Policy, namespace_labels: Mapping[str, str],
                labels: Mapping[str, str]) -> bool:
    """The policy's selectors select this pod (or template), and it is not labelled to skip."""
    if labels.get(SKIP_LABEL) == "true":
        return False
    return (selector_matches(policy.namespace_selector, namespace_labels)
            and selector_matches(policy.pod_selector, labels))


def decide_cost(policy: Policy, annotations: Mapping[str, str], pool: str | None,
                pool_known: bool = True, cost: int | None = None) -> CostDecision:
    """The decision for a pod with `annotations` landing in `pool`.

    `pool` is the pool label's value (None when the node has no such label; such
    nodes get the default cost). `pool_known` is False when the node is not known.
    `cost` is the pod's place in a consolidating pool's band (`consolidation`); without
    it the pool's flat cost.
    """
    if cost_set_by_hand(annotations):
        return CostDecision(KEEP)
    if not pool_known:
        return CostDecision(UNKNOWN_POOL)
    decision = CostDecision(SET, pool, policy.cost_for_pool(pool) if cost is None else cost)
    wanted = decision.annotations
    if all(annotations.get(key) == value for key, value in wanted.items()) and not any(
            key in annotations for key in decision.stale):  # a node that left every pool
        return CostDecision(UNCHANGED, pool, decision.cost)
    return decision


def pinned_pool(policy: Policy, pod: Mapping[str, Any]) -> str | None:
    """The pool a pod's nodeSelector or required node affinity pins, if exactly one."""
    spec = spec_of(pod)
    from_selector = (spec.get("nodeSelector") or {}).get(policy.pool_label)
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
                 "nodeSelectorTerms") or []
    term_pools = [_term_pool(term, policy.pool_label) for term in terms]
    if terms and None not in term_pools and len(set(term_pools)) == 1:
        from_affinity = term_pools[0]
        if from_selector is None or from_selector == from_affinity:
            return from_affinity
        return None  # contradictory: the pod will never schedule; do not guess
    return from_selector


def _term_pool(term: Mapping[str, Any], pool_label: str) -> str | None:
    """The single pool a nodeSelectorTerm requires (terms are ORed, expressions ANDed)."""
    pools = set()
    for expr in term.get("matchExpressions") or []:
        if expr.get("key") == pool_label and expr.get("operator") == "In":
            values = expr.get("values") or []
            if len(values) == 1:
                pools.add(values[0])
            else:
                return None
    return pools.pop() if len(pools) == 1 else None


def escape_pointer(token: str) -> str:
    """RFC 6901 escaping of one JSON Pointer token."""
    return token.replace("~", "~0").replace("/", "~1")


def annotation_patch(obj: Mapping[str, Any], wanted: Mapping[str, str],
                     remove: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """JSON Patch ops that set `wanted` annotations on `obj`, drop `remove`, touch nothing else.

    Adds the annotations map only when it is absent; never replaces an existing map.
    Ops for keys that already hold the wanted value are left out, so re-applying the
    patch to its own result yields no ops (reinvocation is a no-op).
    """
    metadata = obj.get("metadata")
    current = annotations_of(obj)
    changes = {k: v for k, v in wanted.items() if current.get(k) != v}
    removals = [key for key in remove if key in current]
    if not changes and not removals:
        return []
    ops: list[dict[str, Any]] = []
    if not isinstance(metadata, Mapping):
        return [{"op": "add", "path": "/metadata", "value": {"annotations": dict(changes)}}]
    if not isinstance(metadata.get("annotations"), Mapping):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(changes)}]
    for key, value in changes.items():
        ops.append({"op": "add", "path": f"/metadata/annotations/{escape_pointer(key)}",
                    "value": value})
    ops.extend({"op": "remove", "path": f"/metadata/annotations/{escape_pointer(key)}"}
               for key in removals)
    return ops

