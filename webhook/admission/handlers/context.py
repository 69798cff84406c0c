"""What every admission handler shares: its context, its answer and why it gave it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ...core.cost.mutation import KEEP, SET, UNCHANGED
from ...core.policy.policy import Policy
from ...core.view.cluster import ClusterView
from ..review import AdmissionRequest, AdmissionResponse


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


Handler = Callable[[AdmissionRequest, Context], Decision]
