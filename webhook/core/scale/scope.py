"""The scale-down decision `/validate-scale` and `plan` share: in scope, then judged.

One function, so the preview and the webhook cannot drift apart: the policy's
selectors, the `poolguard.dev/skip` label on the workload, its pod template or its
namespace, then the prediction and the verdict. What only the webhook sees (the user
making the request, so `scaleDown.exemptUsers`) is left to the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..cost.mutation import SKIP_LABEL
from ..kinds.registry import kind_named
from ..objects.kube import labels_of, name_of, namespace_of, spec_of
from ..objects.selectors import selector_matches
from ..policy.policy import Policy
from ..view.cluster import ClusterView
from .policy_verdict import PolicyVerdict
from .predict import predict_scale
from .safe_replicas import JudgedScale, assess_scale


@dataclass
class ScopedDecision:
    """The webhook's decision: `assessment` is None when the scale is out of scope."""

    out_of_scope: str | None  # why the policy does not apply, in words
    assessment: JudgedScale | None


@dataclass
class ScalePreview:
    """`plan`'s view of the same decision: always the victims, and why it is unchecked."""

    out_of_scope: str | None
    assessment: JudgedScale


def template_labels(workload: Mapping[str, Any],
                    view: ClusterView | None = None) -> Mapping[str, str]:
    """The labels of the workload's pod template (what the podSelector is matched against).

    A LeaderWorkerSet's is its worker template: every worker's, and every leader's
    unless a leader template is set (sigs.k8s.io/lws leaderworkerset_controller.go,
    `constructLeaderStatefulSetApplyConfiguration`). A workload without a template of its
    own takes the one its kind's record says (`template_ref`: an Argo Rollout's
    `workloadRef`), read through `view`.
    """
    kind = kind_named(workload.get("kind"))
    template = (kind.template_of(workload, view) if kind
                else spec_of(workload).get("template")) or {}
    return ((template.get("metadata") or {}) if isinstance(template, Mapping) else {}).get(
        "labels") or {}


def out_of_scope_reason(policy: Policy, namespace_labels: Mapping[str, str],
                        workload: Mapping[str, Any],
                        view: ClusterView | None = None) -> str | None:
    """Why a scale of `workload` is not checked, in words; None when it is (`view` reads
    a referenced pod template, see `template_labels`)."""
    kind, namespace = workload.get("kind") or "workload", namespace_of(workload)
    if namespace_labels.get(SKIP_LABEL) == "true":
        return f"namespace {namespace} is labelled {SKIP_LABEL}=true"
    if labels_of(workload).get(SKIP_LABEL) == "true":
        return f"{kind} {namespace}/{name_of(workload)} is labelled {SKIP_LABEL}=true"
    pod_labels = template_labels(workload, view)
    if pod_labels.get(SKIP_LABEL) == "true":
        return f"the pod template of {kind} {namespace}/{name_of(workload)} is labelled " \
               f"{SKIP_LABEL}=true"
    if not selector_matches(policy.namespace_selector, namespace_labels):
        return f"namespace {namespace} is not selected by the policy's namespaceSelector"
    if not selector_matches(policy.pod_selector, pod_labels):
        return f"the pod template of {kind} {namespace}/{name_of(workload)} is not selected " \
               "by the policy's podSelector"
    return None


def decide_scale(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                 to_replicas: int, now_ns: int | None) -> ScopedDecision:
    """Decide a scale of `workload` to `to_replicas`, as `/validate-scale` answers it."""
    reason = out_of_scope_reason(policy, view.namespace_labels(namespace_of(workload)), workload,
                                 view)
    if reason is not None:
        return ScopedDecision(reason, None)
    # Quick: the answer must come inside the API server's timeout (see assess_scale).
    return ScopedDecision(None, assess_scale(view, policy, workload, to_replicas, now_ns,
                                            quick=True))


def preview_scale(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                  to_replicas: int, now_ns: int | None) -> ScalePreview:
    """The same decision for `plan`, with what the webhook does not need for its answer.

    In scope: the assessment, with the safe replica count whatever the verdict. Out of
    scope: the predicted victims, with a verdict that allows and says why.
    """
    reason = out_of_scope_reason(policy, view.namespace_labels(namespace_of(workload)), workload,
                                 view)
    if reason is None:
        return ScalePreview(None, assess_scale(view, policy, workload, to_replicas, now_ns))
    prediction = predict_scale(view, workload, to_replicas, now_ns)
    verdict = PolicyVerdict(allowed=True, enforcement=policy.scale_down.enforcement,
                      warnings=[f"not checked: {reason}", *prediction.notes])
    return ScalePreview(reason, JudgedScale(prediction, verdict))
