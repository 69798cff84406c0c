"""Who asks: the answers to a scale-down that depend on the requester, in words.

The webhooks and `plan --as` give the same answers in the same order (`answer.py`): a user in
`scaleDown.exemptUsers` is never checked; a workload its owner sizes is never blocked
(its owner's controller retries forever); an autoscaler or a GitOps controller under
`clamp` enforcement is lowered to the safe count; anyone else gets the policy's verdict,
judged with the enforcement of the group the requester is listed in (`scaleDown.autoscalers`,
`scaleDown.gitOps`), else `scaleDown.enforcement`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..policy.policy import Policy


def is_exempt(policy: Policy, user: str | None) -> bool:
    """A user whose scale requests are never checked (`scaleDown.exemptUsers`)."""
    return user in policy.scale_down.exempt_users


def clamps(policy: Policy, user: str | None) -> bool:
    """An autoscaler or GitOps controller whose unsafe scale-downs are lowered to the safe
    count."""
    return policy.scale_down.clamps(user)


def exempt_note(user: str | None) -> str:
    """Why an exempt user's scale-down is let through without a verdict, in words."""
    return f"{user} is in scaleDown.exemptUsers: never checked"


def owner_note(owner: Mapping[str, Any]) -> str:
    """Why a scale-down of a workload its owner sizes is let through, in words."""
    return (f"sized by its owner {owner.get('kind')} {owner.get('name')}: "
            "poolguard never blocks a replica change of it")
