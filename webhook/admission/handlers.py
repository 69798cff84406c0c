"""The admission handlers: the webhook's decisions, without HTTP.

Each `review_*` handler takes the parsed `request` of an AdmissionReview (review.py) and a
`Context`, and returns a `Decision`: the `response` and why it was given (its `Outcome`).
`ENDPOINTS`, at the end, maps each webhook path to its handler; app.py serves that table,
so a new endpoint is a handler plus one line there. Objects stay plain dicts throughout,
so no field the API server sent is ever dropped.

Size: every endpoint's handler with the context they share, one table at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..core.cost.deletion_cost import (
    DELETION_COST_ANNOTATION,
    InvalidDeletionCost,
    check_deletion_cost,
    go_quote,
    invalid_cost_message,
    is_valid_deletion_cost,
)
from ..core.cost.mutation import (
    KEEP,
    SET,
    UNCHANGED,
    annotation_patch,
    decide_cost,
    is_governed,
    pinned_pool,
)
from ..core.objects.kube import annotations_of, labels_of, replicas_of, spec_of
from ..core.objects.shape import ShapeError, check_object_shape, check_placement_shape
from ..core.policy.policy import Policy, policy_for
from ..core.scale.assessment import Assessment
from ..core.scale.clamp import clamp_scale_down
from ..core.scale.decision import decide_scale
from ..core.scale.owner_sizing import owner_warnings, sizing_owner
from ..core.text import split_at_clauses
from ..core.view.cluster import (
    APPS_WORKLOAD_RESOURCES,
    WORKLOAD_RESOURCES,
    ClusterView,
    workload_kind,
)
from .review import (
    ECHO_LIMIT,
    AdmissionRequest,
    AdmissionResponse,
    BadReview,
    allow,
    deny,
    with_patch,
)

MAX_WARNING_LENGTH = 120  # what kubectl shows comfortably on one line
MAX_WARNINGS_TOTAL = 4096  # the API server's limit on all warnings of a response


@dataclass
class Context:
    """What a decision needs: the policy, a cluster view and the clock."""

    policy: Policy
    view: ClusterView
    now_ns: Callable[[], int]
    # Why the cluster view cannot be trusted right now (stale cache), or None.
    view_problem: Callable[[], str | None] = lambda: None
    fail_closed: bool = False  # deny scale-downs when the view cannot be trusted
    # Looks a pod up; a live runtime reads one its watch has not delivered yet from the API.
    find_pod: Callable[[str, str], Mapping[str, Any] | None] | None = None


class Outcome(StrEnum):
    """Why a handler answered as it did: the `outcome` label of the decisions metric."""

    IGNORED = "ignored"  # not a request this endpoint judges
    NOT_GOVERNED = "not-governed"  # outside the policy's namespace/pod selectors
    INVALID_COST = "invalid-cost"  # denied: a cost the API server would reject
    NODE_UNKNOWN = "node-unknown"
    POOL_UNKNOWN = "pool-unknown"  # the binding webhook sets it
    POD_UNKNOWN = "pod-unknown"  # the reconciler sets the cost once it sees the pod
    SET = SET  # the cost was injected (core.mutation's actions)
    KEEP = KEEP
    UNCHANGED = UNCHANGED
    EXEMPT_USER = "exempt-user"
    OWNER_DECIDED = "owner-decided"  # a non-Deployment owner sizes the workload: never denied
    CLAMPED = "clamped"  # an autoscaler's scale-down lowered to the safe count
    NOT_SCALE_DOWN = "not-scale-down"
    UNCHECKED_ALLOWED = "unchecked-allowed"  # no trustworthy view: fail open
    UNCHECKED_DENIED = "unchecked-denied"  # no trustworthy view: fail closed
    ALLOWED = "allowed"  # checked: no rule broken
    DENIED = "denied"
    WARNED = "warned"
    DRYRUN = "dryrun"
    VALID = "valid"
    PREVIOUSLY_INVALID = "previously-invalid"


@dataclass(frozen=True)
class Decision:
    """A handler's answer: the AdmissionResponse and why it was given.

    Metrics and audit annotations are recorded from it by one wrapper (app.respond),
    so handlers only decide.
    """

    response: AdmissionResponse
    outcome: Outcome
    violated_rules: tuple[str, ...] = ()  # policy rules a checked scale-down breaks
    audit: Mapping[str, str] | None = None  # the response's auditAnnotations
    # Labels of the outcome's own metric (owner-decided, clamped); None: not counted there.
    counted: Mapping[str, str] | None = None

    def final_response(self) -> AdmissionResponse:
        """The response with its audit annotations."""
        if not self.audit:
            return self.response
        return {**self.response, "auditAnnotations": dict(self.audit)}


def _object(request: AdmissionRequest, what: str,
            check: Callable[[Mapping[str, Any], str], None] = check_object_shape,
            ) -> Mapping[str, Any]:
    """`request.object`, with the fields poolguard reads checked for their shape."""
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        raise BadReview(f"request.object: missing; a {what} review needs the object")
    _check_shape(obj, "request.object", check)
    return obj


def _check_shape(obj: Mapping[str, Any], where: str,
                 check: Callable[[Mapping[str, Any], str], None] = check_object_shape) -> None:
    try:
        check(obj, where)
    except ShapeError as err:
        raise BadReview(str(err)) from None
    metadata = obj.get("metadata") or {}
    for key in ("name", "generateName", "namespace"):  # read for messages and lookups
        if metadata.get(key) is not None and not isinstance(metadata[key], str):
            raise BadReview(f"{where}.metadata.{key}: must be a string")


def _is(request: AdmissionRequest, resource: str, sub_resource: str = "") -> bool:
    return ((request.get("resource") or {}).get("resource") == resource
            and (request.get("subResource") or "") == sub_resource)


def _workload_kind(request: AdmissionRequest,
                   kinds: Mapping[tuple[str, str], str] = WORKLOAD_RESOURCES) -> str | None:
    """The workload kind the request's resource (API group and plural) names, or None."""
    resource = request.get("resource") or {}
    return workload_kind(resource.get("group"), resource.get("resource"), kinds)


# --- pods CREATE ---------------------------------------------------------------------


def review_pod_create(request: AdmissionRequest, ctx: Context) -> Decision:
    """Validate an explicit cost; inject the pool's cost when the pool is already known."""
    if not _is(request, "pods") or request.get("operation") != "CREATE":
        return Decision(allow(request), Outcome.IGNORED)
    pod = _object(request, "pod", check_placement_shape)  # the hot path reads only these
    try:
        check_deletion_cost(annotations_of(pod))
    except InvalidDeletionCost as err:
        name = go_quote(_pod_name(pod, request))
        return Decision(deny(request, 422, "Invalid", f"Pod {name} is invalid: {_cost_error(err)}"),
                        Outcome.INVALID_COST)
    namespace = request.get("namespace") or (pod.get("metadata") or {}).get("namespace") or ""
    if not is_governed(ctx.policy, ctx.view.namespace_labels(namespace), labels_of(pod)):
        return Decision(allow(request), Outcome.NOT_GOVERNED)
    node_name = spec_of(pod).get("nodeName")
    if node_name:
        node = ctx.view.node(node_name)
        if node is None:
            return Decision(allow(request), Outcome.NODE_UNKNOWN)
        pool = ctx.policy.pool_of_node(node)
    else:
        pool = pinned_pool(ctx.policy, pod)
        if pool is None:
            return Decision(allow(request), Outcome.POOL_UNKNOWN)  # the binding webhook sets it
    decision = decide_cost(ctx.policy, annotations_of(pod), pool)
    outcome = Outcome(decision.action)
    if decision.action != SET:
        return Decision(allow(request), outcome)
    return Decision(with_patch(request, annotation_patch(pod, decision.annotations,
                                                         decision.stale)), outcome)


def _cost_error(err: InvalidDeletionCost) -> str:
    """The API server's wording, with at most a short prefix of the offending value."""
    value = err.value if len(err.value) <= ECHO_LIMIT else err.value[:ECHO_LIMIT] + "..."
    return invalid_cost_message(value, err.field_path)


def _pod_name(pod: Mapping[str, Any], request: AdmissionRequest) -> str:
    metadata = pod.get("metadata") or {}
    return metadata.get("name") or request.get("name") or metadata.get("generateName") or ""


# --- pods/binding CREATE -------------------------------------------------------------


def review_binding(request: AdmissionRequest, ctx: Context) -> Decision:
    """Add the target node's pool cost to the Binding; the API server copies it to the pod."""
    if not _is(request, "pods", "binding") or request.get("operation") != "CREATE":
        return Decision(allow(request), Outcome.IGNORED)
    binding = _object(request, "binding", check_placement_shape)
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
    decision = decide_cost(ctx.policy, merged, ctx.policy.pool_of_node(node))
    outcome = Outcome(decision.action)
    if decision.action != SET:
        return Decision(allow(request), outcome)
    return Decision(with_patch(request, annotation_patch(binding, decision.annotations)), outcome)


# --- scale -----------------------------------------------------------------------------


def review_scale(request: AdmissionRequest, ctx: Context) -> Decision:
    """Predict the victims of a scale-down and allow, warn or deny per the policy."""
    kind = _workload_kind(request)
    sub = request.get("subResource") or ""
    if kind is None or request.get("operation") != "UPDATE" or sub not in ("", "scale"):
        return Decision(allow(request), Outcome.IGNORED)
    username = (request.get("userInfo") or {}).get("username")
    if username in ctx.policy.scale_down.exempt_users:
        return Decision(allow(request), Outcome.EXEMPT_USER)
    new, old = _object(request, "scale"), request.get("oldObject")
    if isinstance(old, Mapping):
        _check_shape(old, "request.oldObject")
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
    owner = sizing_owner(kind, workload)
    if owner is not None:  # before the cache check: an owner's write is never denied
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
    kind = _workload_kind(request)
    sub = request.get("subResource") or ""
    rules = ctx.policy.scale_down
    username = (request.get("userInfo") or {}).get("username")
    if (kind is None or request.get("operation") != "UPDATE" or sub not in ("", "scale")
            or not rules.is_autoscaler(username) or rules.autoscalers.enforcement != "clamp"):
        return Decision(allow(request), Outcome.IGNORED)
    new, old = _object(request, "scale"), request.get("oldObject")
    if not isinstance(old, Mapping):
        return Decision(allow(request), Outcome.IGNORED)  # an UPDATE always carries it
    _check_shape(old, "request.oldObject")
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
    if sizing_owner(kind, workload) is not None:  # counted once, by /validate-scale
        return Decision(allow(request), Outcome.OWNER_DECIDED)
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
    return value


def _untrusted(request: AdmissionRequest, ctx: Context, problem: str) -> Decision:
    """No trustworthy prediction: follow the configured fail-open or fail-closed setting."""
    message = f"poolguard could not check this scale-down: {problem}"
    if ctx.fail_closed:
        return Decision(deny(request, 503, "ServiceUnavailable", message + "; retry shortly"),
                        Outcome.UNCHECKED_DENIED)
    return Decision(allow(request, warnings=_warnings([message])), Outcome.UNCHECKED_ALLOWED)


def _scale_response(request: AdmissionRequest, ctx: Context,
                    assessment: Assessment) -> Decision:
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
    for violation in verdict.violations:
        message, _, fix = violation.message.partition("; fix: ")
        lines.append(f"poolguard [{violation.rule}] {message}")
        if fix:
            lines.append(f"poolguard fix: {fix}")
    return Decision(allow(request, warnings=_warnings(lines + hints)), Outcome.WARNED,
                    violated_rules=rules, audit=audit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _warnings(texts: Any) -> list[str]:
    """Single-line warnings of at most 120 characters, split between clauses.

    Stops before the API server's 4096-character total, where it would cut them itself.
    """
    out: list[str] = []
    total = 0
    for text in texts:
        for line in split_at_clauses(text, MAX_WARNING_LENGTH):
            if total + len(line) > MAX_WARNINGS_TOTAL:
                return out
            out.append(line)
            total += len(line)
    return out


# --- workload templates ---------------------------------------------------------------


def review_workload(request: AdmissionRequest, ctx: Context) -> Decision:
    """Deny a workload whose pod template carries a cost the API server would reject."""
    # The apps/v1 kinds only: the API server validates only its own kinds' pod templates.
    kind = _workload_kind(request, APPS_WORKLOAD_RESOURCES)
    if (kind is None or request.get("subResource")
            or request.get("operation") not in ("CREATE", "UPDATE")):
        return Decision(allow(request), Outcome.IGNORED)
    workload = _object(request, "workload")
    annotations = _template_annotations(workload, "request.object")
    old = request.get("oldObject")
    if isinstance(old, Mapping):
        _check_shape(old, "request.oldObject")
        previous = _template_annotations(old, "request.oldObject").get(DELETION_COST_ANNOTATION)
        # As the API server (AllowInvalidPodDeletionCost): an update may keep or change a
        # cost that was already invalid; only a newly invalid value is refused.
        if previous is not None and not is_valid_deletion_cost(str(previous)):
            return Decision(allow(request), Outcome.PREVIOUSLY_INVALID)
    try:
        check_deletion_cost(annotations, "spec.template.annotations")  # as the API server names it
    except InvalidDeletionCost as err:
        name = (workload.get("metadata") or {}).get("name") or request.get("name") or ""
        return Decision(deny(request, 422, "Invalid",
                             f"{kind}.apps {go_quote(name)} is invalid: {_cost_error(err)}"),
                        Outcome.INVALID_COST)
    return Decision(allow(request), Outcome.VALID)


def _template_annotations(workload: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    # The shape checks ran before: spec, its template and their metadata are objects or absent.
    template = spec_of(workload).get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    if not isinstance(annotations, Mapping):
        raise BadReview(f"{where}.spec.template.metadata.annotations: must be an object")
    return annotations


Handler = Callable[[AdmissionRequest, Context], Decision]

# The webhook paths (as the webhook configurations in charts/ and manifests/ name them).
ENDPOINTS: dict[str, Handler] = {
    "/mutate-pods": review_pod_create,
    "/mutate-bindings": review_binding,
    "/mutate-scale": review_scale_clamp,
    "/validate-scale": review_scale,
    "/validate-workloads": review_workload,
}
