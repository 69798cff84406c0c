"""Scale requests: the scale-down judged (`/validate-scale`) or clamped (`/mutate-scale`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.objects.deletion_cost import INT32_MAX
from ...core.objects.kube import replicas_of, spec_of
from ...core.policy.policy import policy_for
from ...core.scale.clamp import clamp_scale_down
from ...core.scale.owner_sizing import owner_warnings
from ...core.scale.requester import clamps, is_exempt, unchecked_answer
from ...core.scale.safe_replicas import JudgedScale
from ...core.scale.scope import decide_scale
from ..review import AdmissionRequest, BadReview, allow, deny, with_patch
from ..warning_texts import warning_texts
from .context import Context, Decision, Outcome
from .reading import check_shape, request_object, requested_kind

# The API server's limits (apiserver pkg/endpoints/filters/warning.go): 4096 characters of
# warnings in a response; past that it cuts every warning to 256. Within both, none is cut.
MAX_WARNING_LENGTH = 256
MAX_WARNINGS_TOTAL = 4096


def review_scale(request: AdmissionRequest, ctx: Context) -> Decision:
    """Predict the victims of a scale-down and allow, warn or deny per the policy."""
    kind = requested_kind(request)
    sub = request.get("subResource") or ""
    if kind is None or request.get("operation") != "UPDATE" or sub not in ("", "scale"):
        return Decision(allow(request), Outcome.IGNORED)
    username = (request.get("userInfo") or {}).get("username")
    if is_exempt(ctx.policy, username):
        return Decision(allow(request), Outcome.EXEMPT_USER)
    new, old = request_object(request, "scale"), request.get("oldObject")
    if isinstance(old, Mapping):
        check_shape(old, "request.oldObject")
    to_replicas = _replicas(new, "request.object")
    namespace, name = request.get("namespace") or "", request.get("name") or ""
    # The cache's copy is the API server's own; an UPDATE's oldObject stands in for a
    # workload the cache has not seen yet.
    workload = ctx.view.workload(kind, namespace, name)
    if workload is None and sub == "" and isinstance(old, Mapping):
        # The resource says what it is, whatever its (unchecked) kind field claims.
        workload = {**old, "kind": kind}
    from_replicas = (_replicas(old, "request.oldObject") if isinstance(old, Mapping)
                     else replicas_of(workload) if workload else None)
    if from_replicas is not None and to_replicas >= from_replicas:
        return Decision(allow(request), Outcome.NOT_SCALE_DOWN)
    unchecked = unchecked_answer(ctx.policy, username, kind, workload)
    if unchecked is not None and unchecked.owner is not None:  # before the cache check
        owner = unchecked.owner  # an owner's write is never denied
        return Decision(allow(request, warnings=_warnings(owner_warnings(kind, workload, owner))),
                        Outcome.OWNER_DECIDED,
                        counted={"kind": kind, "owner_kind": str(owner.get("kind") or "")})
    # An untrusted cache cannot even say whether the workload is governed.
    problem = ctx.view_problem()
    if problem:
        return _untrusted(request, ctx, problem)
    if workload is None:
        return _untrusted(request, ctx, f"{kind} {namespace}/{name} is not in poolguard's cache")
    # The same decision as `plan`: selectors, skip labels, prediction, verdict.
    decision = decide_scale(ctx.view, policy_for(ctx.policy, username), workload, to_replicas,
                            ctx.now_ns())
    if decision.assessment is None:
        return Decision(allow(request), Outcome.NOT_GOVERNED)
    return _scale_response(request, ctx, decision.assessment)


def review_scale_clamp(request: Mapping[str, Any], ctx: Context) -> Decision:
    """Lower an autoscaler's unsafe scale-down to the smallest safe count (a JSONPatch).

    Only requests by `scaleDown.autoscalers.users` under enforcement `clamp` are changed;
    everything else passes unchanged and is judged by `/validate-scale`, which then sees
    the clamped count. Anything this cannot decide (a stale cache, an unknown workload,
    a workload another controller sizes) passes unchanged too.
    """
    kind = requested_kind(request)
    sub = request.get("subResource") or ""
    username = (request.get("userInfo") or {}).get("username")
    if (kind is None or request.get("operation") != "UPDATE" or sub not in ("", "scale")
            or not clamps(ctx.policy, username)):
        return Decision(allow(request), Outcome.IGNORED)
    new, old = request_object(request, "scale"), request.get("oldObject")
    if not isinstance(old, Mapping):
        return Decision(allow(request), Outcome.IGNORED)  # an UPDATE always carries it
    check_shape(old, "request.oldObject")
    to_replicas, from_replicas = _replicas(new, "request.object"), _replicas(old,
                                                                           "request.oldObject")
    if to_replicas >= from_replicas:
        return Decision(allow(request), Outcome.NOT_SCALE_DOWN)
    namespace, name = request.get("namespace") or "", request.get("name") or ""
    workload = ctx.view.workload(kind, namespace, name)
    if workload is None and sub == "":
        workload = {**old, "kind": kind}
    if ctx.view_problem() or workload is None:
        return Decision(allow(request), Outcome.UNCHECKED_ALLOWED)
    unchecked = unchecked_answer(ctx.policy, username, kind, workload)
    if unchecked is not None:  # as /validate-scale answers it (and counts it)
        return Decision(allow(request), Outcome(unchecked.unchecked.value))
    clamp = clamp_scale_down(ctx.view, ctx.policy, workload, to_replicas, from_replicas,
                             ctx.now_ns())
    if not clamp.clamped:
        return Decision(allow(request), Outcome.NOT_GOVERNED if clamp.out_of_scope
                        else Outcome.ALLOWED)
    spec = new.get("spec")
    # autoscaling/v1 Scale omits replicas when it is 0: add it then (RFC 6902 add replaces)
    ops = ([{"op": "replace", "path": "/spec/replicas", "value": clamp.replicas}]
           if isinstance(spec, Mapping) and "replicas" in spec else
           [{"op": "add", "path": "/spec/replicas", "value": clamp.replicas}]
           if isinstance(spec, Mapping) else
           [{"op": "add", "path": "/spec", "value": {"replicas": clamp.replicas}}])
    audit = {"clamped": f"{from_replicas}->{to_replicas} became {from_replicas}->"
                        f"{clamp.replicas}",
             "rules": ",".join(v.rule for v in clamp.assessment.verdict.violations)}
    counted = None if request.get("dryRun") else {"kind": kind, "namespace": namespace}
    return Decision(with_patch(request, ops) | {"warnings": _warnings(
        [f"poolguard: {clamp.reason()}"])}, Outcome.CLAMPED, audit=audit, counted=counted)


def _replicas(obj: Any, where: str) -> int:
    value = spec_of(obj).get("replicas") if isinstance(obj, Mapping) else None
    if value is None:
        # autoscaling/v1 Scale omits replicas when it is 0; workloads default it to 1
        return 0 if isinstance(obj, Mapping) and obj.get("kind") == "Scale" else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadReview(f"{where}.spec.replicas: must be a non-negative integer")
    if value > INT32_MAX:  # the API server keeps an int32: not a review it would send
        raise BadReview(f"{where}.spec.replicas: {value} is more than the int32 maximum "
                        f"{INT32_MAX}")
    return value


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
