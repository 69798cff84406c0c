"""Clamping an autoscaler's scale-down to the smallest replica count that is safe now.

An autoscaler (the HPA, KEDA, Knative's autoscaler) cannot read a denial's fix: it retries
the same count every sync and the workload stays at its old size for as long as the
placement lasts. Lowering its request to the smallest safe count instead lets it shrink
as far as is safe now; a later sync goes the rest of the way once the placement allows.

Pure: a cluster view and a policy in, a `Clamp` out. `/mutate-scale` and `plan --as`
both call `clamp_scale_down`, so the preview and the webhook cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..objects.kube import name_of, namespace_of
from ..policy.policy import Policy
from ..view.cluster import ClusterView
from .safe_replicas import JudgedScale, assess_scale
from .scope import out_of_scope_reason


@dataclass(frozen=True)
class Clamp:
    """What an autoscaler's scale-down from `current` to `requested` becomes: `replicas`."""

    kind: str
    namespace: str
    name: str
    current: int
    requested: int
    replicas: int  # the count to write: requested when safe, else in (requested, current]
    assessment: JudgedScale | None  # the requested count judged; None when out of scope
    out_of_scope: str | None = None  # why the policy does not apply, in words

    @property
    def clamped(self) -> bool:
        """True when the request is changed (to a higher count than asked for)."""
        return self.replicas != self.requested

    @property
    def holds(self) -> bool:
        """True when the clamp keeps the current count: no scale-down is safe now."""
        return self.clamped and self.replicas == self.current

    def reason(self) -> str:
        """Why the count was changed, in words; empty when it was not."""
        if not self.clamped or self.assessment is None:
            return ""
        rules = ", ".join(v.rule for v in self.assessment.verdict.violations)
        what = f"{self.kind} {self.namespace}/{self.name}"
        if self.holds:
            return (f"kept {what} at {self.current} replicas (asked: {self.requested}): every "
                    f"lower count would break [{rules}] now")
        return (f"scaled {what} from {self.current} to {self.replicas} replicas, not the "
                f"{self.requested} asked: {self.requested} would break [{rules}] now; "
                f"{self.replicas} is the smallest count that breaks no rule")


def bounded(requested: int, current: int, safe: int | None) -> int:
    """The safe count kept within [requested, current]; unknown (None) keeps `current`."""
    if requested >= current:
        return requested
    if safe is None:
        return current
    return max(requested, min(safe, current))


def clamp_scale_down(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                     requested: int, current: int, now_ns: int | None) -> Clamp:
    """Clamp a scale-down of `workload` from `current` to `requested` replicas.

    The requested count stays when it breaks no rule (judged on the worst case, as
    `/validate-scale` judges it). Otherwise the smallest safe count (`safeReplicas`, the
    number `plan` and the denial's fix give) within [requested, current]; that count is
    judged again as `/validate-scale` will judge it, and when it still breaks a rule
    (minProtectedReplicas at a lower count, a prediction that moved) the current count is
    kept: a clamp never makes the validating webhook deny.
    """
    kind = str(workload.get("kind") or "")
    base = {"kind": kind, "namespace": namespace_of(workload), "name": name_of(workload),
            "current": current, "requested": requested}
    reason = out_of_scope_reason(policy, view.namespace_labels(namespace_of(workload)), workload,
                                 view)
    if reason is not None or requested >= current:
        return Clamp(**base, replicas=requested, assessment=None, out_of_scope=reason)
    assessment = assess_scale(view, policy, workload, requested, now_ns)
    if not assessment.verdict.violations:
        return Clamp(**base, replicas=requested, assessment=assessment)
    target = bounded(requested, current, assessment.verdict.safe_replicas)
    if target < current and assess_scale(view, policy, workload, target, now_ns,
                                         quick=True).verdict.violations:
        target = current
    return Clamp(**base, replicas=target, assessment=assessment)
