"""A pod's home: the pool its own scheduling preference names.

The usual pattern in these clusters: high-priority services prefer the inference pool
(`preferredDuringSchedulingIgnoredDuringExecution` with a high weight on the pool label)
and settle for the hybrid pool when it is full; lower-priority ones prefer the hybrid
pool. The home is the pool of the preferred term with the highest weight that names one
pool on the policy's pool label (`In` with one value); weights of other terms (zones,
GPU models) say nothing about pools. Two terms of that same weight naming different
pools leave the home unknown: the scheduler's score would not pick one either. A pod
whose affinity names no pool gets the pool the policy's `rebalance.priorityClassPools`
gives its `priorityClassName`, if any.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...objects.kube import spec_of
from ...policy.policy import Policy

FROM_AFFINITY = "preferred node affinity"
FROM_PRIORITY_CLASS = "priorityClassName"


@dataclass(frozen=True)
class Home:
    """Where a pod belongs and what says so; `pool` None: nothing names one."""

    pool: str | None
    source: str = ""  # FROM_AFFINITY, FROM_PRIORITY_CLASS, or "" for no home
    why_unknown: str = ""  # for a pod without a home: why none is read

    def describe(self) -> str:
        """`pool inference (preferred node affinity)`, or why there is no home."""
        if self.pool is None:
            return self.why_unknown
        return f"pool {self.pool} ({self.source})"


def home_of(pod: Mapping[str, Any], policy: Policy) -> Home:
    """The pod's home pool, from its preferred node affinity, else its PriorityClass."""
    spec = spec_of(pod)
    weighted = _pool_preferences(spec, policy.pool_label)
    if weighted:
        top = max(weight for weight, _ in weighted)
        pools = sorted({pool for weight, pool in weighted if weight == top})
        if len(pools) == 1:
            return Home(pools[0], FROM_AFFINITY)
        return Home(None, why_unknown=f"its preferred node affinity weighs pools "
                    f"{' and '.join(pools)} equally ({top})")
    by_class = policy.rebalance.pool_for_priority_class(spec.get("priorityClassName"))
    if by_class is not None:
        return Home(by_class, FROM_PRIORITY_CLASS)
    return Home(None, why_unknown=f"neither its preferred node affinity on "
                f"{policy.pool_label} nor its priorityClassName names a home pool")


def _pool_preferences(spec: Mapping[str, Any], pool_label: str) -> list[tuple[int, str]]:
    """(weight, pool) of each preferred term that names one pool on `pool_label`."""
    preferred = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("preferredDuringSchedulingIgnoredDuringExecution")) or ()
    found = []
    for term in preferred:
        if not isinstance(term, Mapping) or not isinstance(term.get("weight"), int):
            continue
        pool = _named_pool(term.get("preference") or {}, pool_label)
        if pool is not None and term["weight"] > 0:
            found.append((term["weight"], pool))
    return found


def _named_pool(preference: Mapping[str, Any], pool_label: str) -> str | None:
    """The one pool a NodeSelectorTerm asks for on `pool_label` (`In` with one value)."""
    pools = set()
    for expression in preference.get("matchExpressions") or ():
        if not isinstance(expression, Mapping) or expression.get("key") != pool_label:
            continue
        values = expression.get("values") or []
        if expression.get("operator") != "In" or len(values) != 1:
            return None
        pools.add(values[0])
    return pools.pop() if len(pools) == 1 else None
