"""A new policy vetted against the nodes before it replaces the one in force.

A running server or reconciler re-reads its policy when the ConfigMap changes. A change
that leaves a protected pool without nodes (a pool name or `poolLabel` mistyped) would
turn protection off at once and have the reconciler rewrite the protected pods' costs:
it is refused, and the policy in force stays. A change that keeps a problem the policy in
force already has is not refused for it (it makes nothing worse; the degraded metric and
`policy check` name it). A real re-pooling labels the nodes first: the new policy then
finds its nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .policy import Policy
from .pool_coverage import pool_coverage


def change_refusal(current: Policy, new: Policy,
                   nodes: Iterable[Mapping[str, Any]]) -> str | None:
    """Why `new` must not replace `current` given the cluster's `nodes`, in words; None
    when it may (or when there are no nodes to judge by)."""
    node_list = list(nodes)
    if not node_list:
        return None
    after = pool_coverage(new, node_list)
    if not after.disarmed:
        return None
    already = {finding.key for finding in pool_coverage(current, node_list).disarming}
    worse = [finding.message for finding in after.disarming if finding.key not in already]
    return "; ".join(worse) or None
