"""The answer to a scale request: one function, in the order both scale webhooks decide.

`answer_scale` is what `/validate-scale`, `/mutate-scale` and `plan` (also `plan --as`)
ask: the handlers decode a `ScaleRequest` from an AdmissionRequest and encode the
`ScaleAnswer`; `plan` builds the request from its arguments. `/validate-scale` decides in
this order: a user in `scaleDown.exemptUsers`, not a scale-down, a workload its owner
sizes, a view that cannot be trusted (or has no such workload), out of the policy's scope,
then the verdict. `/mutate-scale` (the `clamp` variant, for requesters under enforcement
`clamp`) asks whether it is a scale-down and whether the view can be trusted first, and
clamps where the other judges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..objects.kube import namespace_of, replicas_of
from ..policy.policy import Policy, policy_for
from ..view.cluster import ClusterView
from .clamp import Clamp, clamp_scale_down
from .owner_sizing import sizing_owner
from .requester import exempt_note, is_exempt, owner_note
from .safe_replicas import JudgedScale
from .scope import decide_scale, out_of_scope_reason


@dataclass(frozen=True)
class ScaleRequest:
    """A change of one workload's replicas, as a requester asks for it."""

    kind: str
    namespace: str
    name: str
    to_replicas: int
    # The count before, as the request carries it (its old object); None when it carries
    # none, and then the view's copy of the workload tells.
    from_replicas: int | None
    username: str | None
    # The workload as the request carries it (an UPDATE's old object, not its Scale): it
    # stands in for a workload the view has not seen yet.
    workload: Mapping[str, Any] | None = None


class ScaleOutcome(StrEnum):
    """What the answer is, and why."""

    EXEMPT_USER = "exempt-user"  # the requester is never checked
    NOT_SCALE_DOWN = "not-scale-down"
    OWNER_DECIDED = "owner-decided"  # a non-modelled owner sizes the workload: never blocked
    UNTRUSTED = "untrusted"  # no trustworthy view of the workload: `problem` says why
    NOT_GOVERNED = "not-governed"  # out of the policy's scope: `out_of_scope` says why
    JUDGED = "judged"  # the verdict is the answer (`assessment`, when asked to assess)
    ALLOWED = "allowed"  # clamp: the requested count breaks no rule
    CLAMPED = "clamped"  # clamp: lowered to the safe count (`clamp`)


@dataclass(frozen=True)
class ScaleAnswer:
    """The answer to a `ScaleRequest` and what the handlers and `plan` render from it."""

    outcome: ScaleOutcome
    workload: Mapping[str, Any] | None = None
    # Why the requester is answered without the verdict, in words (exempt, owner, clamp).
    note: str = ""
    owner: Mapping[str, Any] | None = None  # the sizing owner's controller reference
    problem: str | None = None
    out_of_scope: str | None = None
    assessment: JudgedScale | None = None
    clamp: Clamp | None = None


def answer_scale(request: ScaleRequest, view: ClusterView, policy: Policy,
                 now_ns: int | None, *, view_problem: Callable[[], str | None] = lambda: None,
                 clamp: bool = False, assess: bool = True) -> ScaleAnswer:
    """Answer a scale request as the webhooks do.

    `view_problem` says why the view cannot be trusted now (a stale cache), or None.
    `clamp`: the `/mutate-scale` variant, which lowers an unsafe scale-down to the safe
    count instead of judging it. `assess=False` stops where the verdict would be computed
    (outcome JUDGED without an assessment), for `plan`, which previews it itself.
    """
    if clamp:
        return _answer_clamp(request, view, policy, now_ns, view_problem)
    if is_exempt(policy, request.username):
        return ScaleAnswer(ScaleOutcome.EXEMPT_USER, note=exempt_note(request.username))
    # The view's copy is the API server's own; the request's stands in for one it has
    # not seen yet.
    workload = _workload(request, view)
    from_replicas = (request.from_replicas if request.from_replicas is not None
                     else replicas_of(workload) if workload else None)
    if from_replicas is not None and request.to_replicas >= from_replicas:
        return ScaleAnswer(ScaleOutcome.NOT_SCALE_DOWN, workload)
    owner = sizing_owner(request.kind, workload)
    if owner is not None:  # before the view's trust: an owner's write is never denied
        return ScaleAnswer(ScaleOutcome.OWNER_DECIDED, workload, note=owner_note(owner),
                           owner=owner)
    # An untrusted view cannot even say whether the workload is governed.
    problem = view_problem() or (None if workload is not None else
                                 f"{request.kind} {request.namespace}/{request.name} is not "
                                 "in poolguard's cache")
    if problem:
        return ScaleAnswer(ScaleOutcome.UNTRUSTED, workload, problem=problem)
    judged = policy_for(policy, request.username)
    if not assess:
        reason = out_of_scope_reason(judged, view.namespace_labels(namespace_of(workload)),
                                     workload, view)
        return (ScaleAnswer(ScaleOutcome.NOT_GOVERNED, workload, out_of_scope=reason)
                if reason is not None else ScaleAnswer(ScaleOutcome.JUDGED, workload))
    decision = decide_scale(view, judged, workload, request.to_replicas, now_ns)
    if decision.assessment is None:
        return ScaleAnswer(ScaleOutcome.NOT_GOVERNED, workload,
                           out_of_scope=decision.out_of_scope)
    return ScaleAnswer(ScaleOutcome.JUDGED, workload, assessment=decision.assessment)


def _answer_clamp(request: ScaleRequest, view: ClusterView, policy: Policy,
                  now_ns: int | None, view_problem: Callable[[], str | None]) -> ScaleAnswer:
    """The `/mutate-scale` order: anything it cannot decide passes unchanged, to be
    judged by `/validate-scale`."""
    workload = _workload(request, view)
    from_replicas = (request.from_replicas if request.from_replicas is not None
                     else replicas_of(workload) if workload else request.to_replicas)
    if request.to_replicas >= from_replicas:
        return ScaleAnswer(ScaleOutcome.NOT_SCALE_DOWN, workload)
    problem = view_problem()
    if problem or workload is None:
        return ScaleAnswer(ScaleOutcome.UNTRUSTED, workload, problem=problem)
    if is_exempt(policy, request.username):  # as /validate-scale answers it (and counts it)
        return ScaleAnswer(ScaleOutcome.EXEMPT_USER, workload,
                           note=exempt_note(request.username))
    owner = sizing_owner(request.kind, workload)
    if owner is not None:
        return ScaleAnswer(ScaleOutcome.OWNER_DECIDED, workload, note=owner_note(owner),
                           owner=owner)
    clamped = clamp_scale_down(view, policy, workload, request.to_replicas, from_replicas,
                               now_ns)
    if clamped.clamped:
        return ScaleAnswer(ScaleOutcome.CLAMPED, workload, note=clamped.reason(),
                           clamp=clamped)
    if clamped.out_of_scope:
        return ScaleAnswer(ScaleOutcome.NOT_GOVERNED, workload,
                           out_of_scope=clamped.out_of_scope, clamp=clamped)
    return ScaleAnswer(ScaleOutcome.ALLOWED, workload, clamp=clamped)


def _workload(request: ScaleRequest, view: ClusterView) -> Mapping[str, Any] | None:
    """The view's copy of the workload, else the request's (its kind the resource's: the
    resource says what it is, whatever its unchecked kind field claims)."""
    workload = view.workload(request.kind, request.namespace, request.name)
    if workload is None and request.workload is not None:
        return {**request.workload, "kind": request.kind}
    return workload
