"""Predict and judge a scale in one call, with the smallest replica count that is safe now."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .cluster import ClusterView
from .policy import Policy
from .prediction import ScalePrediction, predict_scale
from .verdict import Protection, Verdict, evaluate, protection, worst_case_victims


@dataclass
class Assessment:
    prediction: ScalePrediction
    verdict: Verdict


def assess_scale(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                 to_replicas: int, now_ns: int | None, quick: bool = False) -> Assessment:
    """Predict the victims of scaling `workload` to `to_replicas` and judge them.

    The safe replica count comes with every verdict, except with `quick` (the webhook,
    inside the API server's timeout): then only for a violation's fix, and only when one
    prediction gives it (one ReplicaSet or a StatefulSet shrinks); a rollout would need a
    dozen re-predictions, and the fix points to `plan` instead.
    """
    prediction = predict_scale(view, workload, to_replicas, now_ns)
    protected = protection(policy, view.node)
    verdict = evaluate(policy, prediction, view.node, protected)
    if not quick or (verdict.violations and prediction.prefix_order is not None):
        verdict.safe_replicas = smallest_safe_replicas(view, policy, workload, prediction,
                                                       now_ns, protected)
    if verdict.violations:
        fix = _fix_text(prediction, verdict.safe_replicas)
        for violation in verdict.violations:
            violation.message = f"{violation.message}; fix: {fix}"
    return Assessment(prediction, verdict)


def removes_protected(view: ClusterView, policy: Policy, prediction: ScalePrediction) -> bool:
    """True when the worst case of `prediction` deletes a pod on a protected pool."""
    protected = protection(policy, view.node)
    return any(protected(p) for p in worst_case_victims(prediction, protected))


def smallest_safe_replicas(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                           prediction: ScalePrediction, now_ns: int | None,
                           protected: Protection | None = None) -> int:
    """The lowest replica count whose scale-down removes no protected-pool pod now.

    Whatever the requested count: 0 when no pod runs on a protected pool, the number of
    active pods when even one deletion could take a protected pod.
    """
    if protected is None:
        protected = protection(policy, view.node)

    if prediction.prefix_order is not None:
        order = prediction.prefix_order
        return len(order) - _safe_prefix_length(order, protected, prediction.kind)
    return _search_safe_replicas(view, policy, workload, prediction, now_ns)


def _safe_prefix_length(order: list[Any], protected: Any, kind: str) -> int:
    """How many pods from the front of `order` go before one could be protected.

    A cut inside a group tied on rules 1-5 may take any member of the group, so the
    safe prefix ends where the group of the first protected pod begins.
    """
    flags = (protected.flags(order) if isinstance(protected, Protection)
             else list(map(protected, order)))
    first = flags.index(True) if True in flags else len(order)
    if kind == "StatefulSet" or first == len(order):
        return first  # ordinals leave no ties
    key = order[first].key_rules_1_to_5
    while first > 0 and order[first - 1].key_rules_1_to_5 == key:
        first -= 1
    return first


def _search_safe_replicas(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                          prediction: ScalePrediction, now_ns: int | None) -> int:
    """Binary search over re-predictions, for rollouts and multi-sync scale-downs.

    Fewer replicas never spare a pod that more replicas delete, so the boundary between
    safe and unsafe counts is found in O(log n) predictions.
    """
    unsafe, safe = -1, len(prediction.victims) + len(prediction.survivors)  # safe: no deletion
    while safe - unsafe > 1:
        middle = (unsafe + safe) // 2
        if removes_protected(view, policy, predict_scale(view, workload, middle, now_ns)):
            unsafe = middle
        else:
            safe = middle
    return safe


def _fix_text(prediction: ScalePrediction, safe: int | None) -> str:
    options = []
    if safe is None:
        options.append(f"scale no lower than the smallest replica count that removes no "
                       f"protected-pool pod, which 'python -m webhook plan --workload "
                       f"{prediction.kind.lower()}/{prediction.namespace}/{prediction.name} "
                       f"--replicas {prediction.to_replicas}' names")
    elif prediction.to_replicas < safe < prediction.from_replicas:
        options.append(f"scale to {safe} replicas or more for now (the smallest count that "
                       "removes no protected-pool pod)")
    if prediction.kind == "StatefulSet":
        # Deletion cost does not apply: a StatefulSet always removes its highest ordinals.
        options.append("run the highest ordinals outside protected pools (for example with "
                       "pod affinity or a pool-pinned StatefulSet per pool)")
    else:
        options.append("give the pods outside protected pools a lower deletion cost than "
                       "the protected ones, then retry")
    return "; or ".join(options)
