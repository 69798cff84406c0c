"""Who asks: the answers to a scale-down that depend on the requester, in one order.

The webhooks and `plan --as` give the same answers in the same order: a user in
`scaleDown.exemptUsers` is never checked; a workload its owner sizes is never blocked
(its owner's controller retries forever); an autoscaler or a GitOps controller under
`clamp` enforcement is lowered to the safe count; anyone else gets the policy's verdict,
judged with the enforcement of the group the requester is listed in (`scaleDown.autoscalers`,
`scaleDown.gitOps`), else `scaleDown.enforcement`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..policy.policy import Policy
from ..view.cluster import ClusterView
from .clamp import Clamp, clamp_scale_down
from .owner_sizing import sizing_owner


class Unchecked(StrEnum):
    """Why a requester's scale-down is let through without a verdict."""

    EXEMPT_USER = "exempt-user"
    OWNER_DECIDED = "owner-decided"
    CLAMPED = "clamped"


@dataclass(frozen=True)
class RequesterAnswer:
    """The answer a requester gets instead of the verdict, and why, in words."""

    unchecked: Unchecked
    note: str
    owner: Mapping[str, Any] | None = None  # the sizing owner's controller reference
    clamp: Clamp | None = None


def is_exempt(policy: Policy, user: str | None) -> bool:
    """A user whose scale requests are never checked (`scaleDown.exemptUsers`)."""
    return user in policy.scale_down.exempt_users


def clamps(policy: Policy, user: str | None) -> bool:
    """An autoscaler or GitOps controller whose unsafe scale-downs are lowered to the safe
    count."""
    return policy.scale_down.clamps(user)


def unchecked_answer(policy: Policy, user: str | None, kind: str,
                     workload: Mapping[str, Any] | None) -> RequesterAnswer | None:
    """An exempt user's answer, else an owner-sized workload's; None when neither."""
    if is_exempt(policy, user):
        return RequesterAnswer(Unchecked.EXEMPT_USER,
                               f"{user} is in scaleDown.exemptUsers: never checked")
    owner = sizing_owner(kind, workload)
    if owner is not None:
        return RequesterAnswer(Unchecked.OWNER_DECIDED,
                               f"sized by its owner {owner.get('kind')} {owner.get('name')}: "
                               "poolguard never blocks a replica change of it", owner=owner)
    return None


def answer_requester(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                     to_replicas: int, from_replicas: int, now_ns: int | None,
                     user: str | None) -> RequesterAnswer | None:
    """What `user` is answered for this scale-down instead of the verdict, in the order
    the webhooks decide; None when the verdict is the answer."""
    answer = unchecked_answer(policy, user, str(workload.get("kind") or ""), workload)
    if answer is not None:
        return answer
    if clamps(policy, user):
        clamp = clamp_scale_down(view, policy, workload, to_replicas, from_replicas, now_ns)
        if clamp.clamped:
            return RequesterAnswer(Unchecked.CLAMPED, clamp.reason(), clamp=clamp)
    return None
