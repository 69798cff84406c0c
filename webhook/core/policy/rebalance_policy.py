"""The policy's `rebalance` section: moving settled overflow pods home, off by default.

    rebalance:
      enabled: false               # the default: nothing is planned for the live cluster
      priorityClassPools:          # a home pool for pods whose affinity names none
        high-priority: inference

Its model is read like the rest of the policy (`policy_key`, `policy_schema` read the same
field metadata); its errors name the field under `rebalance.` and policy.py prefixes them
with the file, as it does for selectors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError

# A PriorityClass name is a DNS subdomain (metadata.name of a cluster-scoped object).
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_KEYS = {"enabled", "priorityClassPools"}


class RebalancePolicyError(InputError):
    """A `rebalance` section that cannot be used; the message names the field."""


@dataclass(frozen=True)
class RebalancePolicy:
    """Whether overflow pods are moved home, and where pods without a preference belong."""

    enabled: bool = field(default=False, metadata={
        "description": "move settled overflow pods from unprotected pools back to the "
        "protected pool they prefer, whole nodes at a time (off by default; `rebalance "
        "--dry-run` shows the plan whatever this says)", "schema": {}})
    priority_class_pools: Mapping[str, str] = field(default_factory=dict, metadata={
        "description": "the home pool of pods whose preferred node affinity names no pool, "
        "by their priorityClassName", "schema": {"additionalProperties": {"type": "string"}}})

    def pool_for_priority_class(self, name: str | None) -> str | None:
        """The home pool the policy gives pods of PriorityClass `name`, if any."""
        return self.priority_class_pools.get(name) if name else None


def parse_rebalance(value: Any, pools: Sequence[Any]) -> RebalancePolicy:
    """The `rebalance` section (None: absent), checked against the policy's `pools`
    (records with `name` and `protected`); RebalancePolicyError names the field."""
    if value is None:
        return RebalancePolicy()
    if not isinstance(value, Mapping):
        raise RebalancePolicyError("rebalance: must be a mapping such as {enabled: false}")
    unknown = sorted(str(key) for key in value if key not in _KEYS)
    if unknown:
        raise RebalancePolicyError(f"rebalance.{unknown[0]}: unknown field (known: "
                                   f"{', '.join(sorted(_KEYS))})")
    enabled = value.get("enabled", False)
    if not isinstance(enabled, bool):
        raise RebalancePolicyError("rebalance.enabled: must be true or false")
    classes = _priority_class_pools(value.get("priorityClassPools"), pools)
    if enabled:
        _check_a_way_home(pools)
    return RebalancePolicy(enabled=enabled, priority_class_pools=classes)


def _priority_class_pools(value: Any, pools: Sequence[Any]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RebalancePolicyError("rebalance.priorityClassPools: must map PriorityClass "
                                   "names to pool names")
    names = [pool.name for pool in pools]
    classes: dict[str, str] = {}
    for name, pool in value.items():
        where = f"rebalance.priorityClassPools.{name}"
        if not isinstance(name, str) or not _SUBDOMAIN.fullmatch(name) or len(name) > 253:
            raise RebalancePolicyError(f"{where}: {name!r} is not a PriorityClass name (a "
                                       "lower-case DNS subdomain)")
        if pool not in names:
            raise RebalancePolicyError(f"{where}: {pool!r} is not a pool of this policy "
                                       f"(pools: {', '.join(names)})")
        classes[name] = pool
    return classes


def _check_a_way_home(pools: Sequence[Any]) -> None:
    """An enabled rebalancer needs a protected pool to move to and another to move from;
    without them it would be on and never move a pod, which nobody would notice."""
    if not any(pool.protected for pool in pools):
        raise RebalancePolicyError("rebalance.enabled: true needs a protected pool to move "
                                   "pods home to, and no pool is protected")
    if all(pool.protected for pool in pools):
        raise RebalancePolicyError("rebalance.enabled: true needs an unprotected pool to "
                                   "move pods from, and every pool is protected")
