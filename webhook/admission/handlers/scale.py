"""Scale requests: the scale-down judged (`/validate-scale`) or clamped (`/mutate-scale`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.scale.answer import ScaleAnswer, ScaleOutcome, ScaleRequest, answer_scale
from ...core.scale.owner_sizing import owner_warnings
from ...core.scale.requester import clamps, is_exempt
from ...core.scale.safe_replicas import JudgedScale
from ..review import AdmissionRequest, allow, deny, with_patch
from ..warning_texts import warning_texts
from .context import Context, Decision, Outcome
from .filters import (
    with_operation_filter,
    with_requester_filter,
    with_subresource_filter,
    with_workload_filter,
    without_requester,
)
from .scale_request import decode_scale, decode_update

# The API server's limits (apiserver pkg/endpoints/filters/warning.go): 4096 characters of
# warnings in a response; past that it cuts every warning to 256. Within both, none is cut.
MAX_WARNING_LENGTH = 256
MAX_WARNINGS_TOTAL = 4096


@with_workload_filter
@with_operation_filter("UPDATE")
@with_subresource_filter("", "scale")
@without_requester(is_exempt, Outcome.EXEMPT_USER)  # never checked: not even read
def review_scale(request: AdmissionRequest, ctx: Context) -> Decision:
    """Predict the victims of a scale-down and allow, warn or deny per the policy."""
    scale = decode_scale(request)
    answer = answer_scale(scale, ctx.view, ctx.policy, ctx.now_ns(),
                          view_problem=ctx.view_problem)
    outcome = answer.outcome
    if outcome is ScaleOutcome.OWNER_DECIDED:  # an owner's write is never denied
        owner, workload = answer.owner or {}, answer.workload or {}
        return Decision(allow(request, warnings=_warnings(owner_warnings(scale.kind, workload,
                                                                         owner))),
                        Outcome.OWNER_DECIDED,
                        counted={"kind": scale.kind, "owner_kind": str(owner.get("kind") or "")})
    if outcome is ScaleOutcome.UNTRUSTED:
        return _untrusted(request, ctx, answer.problem or "")
    if outcome is ScaleOutcome.JUDGED:
        assert answer.assessment is not None  # asked to assess
        return _scale_response(request, ctx, answer.assessment)
    return Decision(allow(request), _SIMPLE[outcome])


@with_workload_filter
@with_operation_filter("UPDATE")
@with_subresource_filter("", "scale")
@with_requester_filter(clamps)
def review_scale_clamp(request: AdmissionRequest, ctx: Context) -> Decision:
    """Lower an autoscaler's unsafe scale-down to the smallest safe count (a JSONPatch).

    Only requests by `scaleDown.autoscalers.users` under enforcement `clamp` are changed;
    everything else passes unchanged and is judged by `/validate-scale`, which then sees
    the clamped count. Anything this cannot decide (a stale cache, an unknown workload,
    a workload another controller sizes) passes unchanged too.
    """
    scale = decode_update(request)
    if scale is None:
        return Decision(allow(request), Outcome.IGNORED)  # an UPDATE always carries it
    answer = answer_scale(scale, ctx.view, ctx.policy, ctx.now_ns(),
                          view_problem=ctx.view_problem, clamp=True)
    if answer.outcome is not ScaleOutcome.CLAMPED or answer.clamp is None:
        return Decision(allow(request), _SIMPLE[answer.outcome])
    return _clamped(request, scale, answer)


# The outcome of an answer that allows the request as it is, without a word.
_SIMPLE = {
    ScaleOutcome.EXEMPT_USER: Outcome.EXEMPT_USER,
    ScaleOutcome.NOT_SCALE_DOWN: Outcome.NOT_SCALE_DOWN,
    ScaleOutcome.OWNER_DECIDED: Outcome.OWNER_DECIDED,
    ScaleOutcome.UNTRUSTED: Outcome.UNCHECKED_ALLOWED,  # the clamp passes it to be judged
    ScaleOutcome.NOT_GOVERNED: Outcome.NOT_GOVERNED,
    ScaleOutcome.ALLOWED: Outcome.ALLOWED,
}


def _clamped(request: AdmissionRequest, scale: ScaleRequest, answer: ScaleAnswer) -> Decision:
    """The patch that writes the clamped count, with its warning and audit."""
    clamp = answer.clamp
    assert clamp is not None and clamp.assessment is not None
    new = request["object"]
    spec = new.get("spec")
    # autoscaling/v1 Scale omits replicas when it is 0: add it then (RFC 6902 add replaces)
    ops = ([{"op": "replace", "path": "/spec/replicas", "value": clamp.replicas}]
           if isinstance(spec, Mapping) and "replicas" in spec else
           [{"op": "add", "path": "/spec/replicas", "value": clamp.replicas}]
           if isinstance(spec, Mapping) else
           [{"op": "add", "path": "/spec", "value": {"replicas": clamp.replicas}}])
    current, requested = scale.from_replicas, scale.to_replicas
    audit = {"clamped": f"{current}->{requested} became {current}->{clamp.replicas}",
             "rules": ",".join(v.rule for v in clamp.assessment.verdict.violations)}
    counted = None if request.get("dryRun") else {"kind": scale.kind,
                                                   "namespace": scale.namespace}
    return Decision(with_patch(request, ops) | {"warnings": _warnings(
        [f"poolguard: {answer.note}"])}, Outcome.CLAMPED, audit=audit, counted=counted)


def _untrusted(request: AdmissionRequest, ctx: Context, problem: str) -> Decision:
    """No trustworthy prediction: follow the configured fail-open or fail-closed setting."""
    message = f"poolguard could not check this scale-down: {problem}"
    if ctx.fail_closed:
        return Decision(deny(request, 503, "ServiceUnavailable", message + "; retry shortly"),
                        Outcome.UNCHECKED_DENIED)
    return Decision(allow(request, warnings=_warnings([message])), Outcome.UNCHECKED_ALLOWED)


def _scale_response(request: AdmissionRequest, ctx: Context,
                    assessment: JudgedScale) -> Decision:
    prediction, verdict = assessment.prediction, assessment.verdict
    victims = [p.name for p in prediction.victims]
    audit = {"victims": _clip(",".join(victims), 1000) or "none",
             "verdict": "allowed" if not verdict.violations else (
                 "denied" if not verdict.allowed else f"violation-{verdict.enforcement}")}
    if prediction.blocked:  # condemned pods that wait: they go once the pod they wait on is healthy
        audit["blocked"] = _clip(",".join(f"{b.pod.name}(waits on {b.waiting_on})"
                                          for b in prediction.blocked), 1000)
    if verdict.violations:
        audit["rules"] = ",".join(v.rule for v in verdict.violations)
    rules = tuple(v.rule for v in verdict.violations)
    header = (f"scaling {prediction.kind} {prediction.namespace}/{prediction.name} from "
              f"{prediction.from_replicas} to {prediction.to_replicas}")
    hints = [f"poolguard: {w}" for w in verdict.warnings]
    if not verdict.violations:
        return Decision(allow(request, warnings=_warnings(hints)), Outcome.ALLOWED, audit=audit)
    details = "; ".join(f"[{v.rule}] {v.message}" for v in verdict.violations)
    if not verdict.allowed:
        return Decision(deny(request, 403, "Forbidden",
                             f"poolguard: {header} breaks the inference-pool policy: {details}",
                             warnings=_warnings(hints)),
                        Outcome.DENIED, violated_rules=rules, audit=audit)
    if verdict.enforcement == "dryrun":
        return Decision(allow(request), Outcome.DRYRUN, violated_rules=rules, audit=audit)
    lines = [f"poolguard: {header} breaks the policy (enforcement: warn)"]
    lines.extend(f"poolguard [{v.rule}] {v.problem}" for v in verdict.violations)
    # One warning per option (each one thing to do), once even when rules share them.
    fixes = dict.fromkeys(fix for v in verdict.violations for fix in v.fixes)
    lines.extend(f"poolguard fix: {fix}" for fix in fixes)
    return Decision(allow(request, warnings=_warnings(lines + hints)), Outcome.WARNED,
                    violated_rules=rules, audit=audit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _warnings(texts: Any) -> list[str]:
    """One single-line warning per text (kubectl prints each as a `Warning:` line of its
    own), within the API server's limits, so that it never cuts one."""
    return warning_texts(list(texts), MAX_WARNING_LENGTH, MAX_WARNINGS_TOTAL)
