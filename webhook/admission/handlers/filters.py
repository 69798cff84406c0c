"""Filters a handler is wrapped in: requests an endpoint does not judge pass unchanged.

Each wrapper answers `Outcome.IGNORED` (allowed, untouched) before its handler reads the
request, as Kyverno's `WithOperationFilter` and `WithSubResourceFilter` do, so a handler
sees only what it decides.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from ...core.policy.policy import Policy
from ..review import AdmissionRequest, allow
from .context import Context, Decision, Handler, Outcome
from .reading import requested_kind


def _passing(test: Callable[[AdmissionRequest, Context], bool],
             outcome: Outcome = Outcome.IGNORED) -> Callable[[Handler], Handler]:
    """A wrapper that answers `outcome` (allowed, unchanged) unless `test` holds."""
    def wrap(handler: Handler) -> Handler:
        @wraps(handler)
        def filtered(request: AdmissionRequest, ctx: Context) -> Decision:
            if not test(request, ctx):
                return Decision(allow(request), outcome)
            return handler(request, ctx)
        return filtered
    return wrap


def username_of(request: AdmissionRequest) -> str | None:
    """Who makes the request (`userInfo.username`), or None."""
    return (request.get("userInfo") or {}).get("username")


def with_operation_filter(*operations: str) -> Callable[[Handler], Handler]:
    """Pass requests of any other operation."""
    return _passing(lambda request, _: request.get("operation") in operations)


def with_subresource_filter(*subresources: str) -> Callable[[Handler], Handler]:
    """Pass requests of any other subresource ("" is the resource itself)."""
    return _passing(lambda request, _: (request.get("subResource") or "") in subresources)


def with_resource_filter(resource: str) -> Callable[[Handler], Handler]:
    """Pass requests for any other resource (by its plural, e.g. `pods`)."""
    return _passing(lambda request, _: (request.get("resource") or {}).get("resource")
                    == resource)


def with_workload_filter(handler: Handler) -> Handler:
    """Pass requests for a resource that is no registered workload kind."""
    return _passing(lambda request, _: requested_kind(request) is not None)(handler)


def with_requester_filter(test: Callable[[Policy, str | None], bool],
                          ) -> Callable[[Handler], Handler]:
    """Pass requests by anyone the policy does not pick with `test`."""
    return _passing(lambda request, ctx: test(ctx.policy, username_of(request)))


def without_requester(test: Callable[[Policy, str | None], bool],
                      outcome: Outcome) -> Callable[[Handler], Handler]:
    """Answer `outcome` before the request is read for anyone the policy picks with `test`
    (the requesters it never checks, as Kyverno filters its excluded users)."""
    return _passing(lambda request, ctx: not test(ctx.policy, username_of(request)), outcome)
