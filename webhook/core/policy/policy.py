"""The pool policy: its pools, validation with field-named errors, and pool lookups.

The `scaleDown` section is `scale_down_policy.py`, the `rebalance` section
`rebalance_policy.py`; what a field declares and how errors name it is `policy_field.py`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..objects.deletion_cost import INT32_MAX, INT32_MIN
from ..objects.kube import labels_of
from ..objects.selectors import LABEL_SELECTOR_SCHEMA, SelectorError, validate_selector
from .policy_field import PolicyError, described, policy_keys, reject_unknown, shown, type_name
from .pool_bands import (
    CONSOLIDATE_MODES,
    CONSOLIDATE_NODES,
    CONSOLIDATE_NONE,
    DEFAULT_BAND_WIDTH,
    SLOTS,
    Band,
    band_conflict,
    band_of,
)
from .rebalance_policy import RebalancePolicy, RebalancePolicyError, parse_rebalance
from .scale_down_policy import ScaleDownPolicy, parse_scale_down

# The extended resources that count as GPUs by default (see consolidation/node_occupancy).
DEFAULT_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915",
                         "habana.ai/gaudi")
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
# A pool name is a node label value (no node is in a pool its label cannot name), which
# also makes it a valid part of a ConfigMap key (the admission policy's params).
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_INT32 = {"minimum": INT32_MIN, "maximum": INT32_MAX}
_RESOURCE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*"
                            r"[A-Za-z0-9])?")


@dataclass(frozen=True)
class Pool:
    name: str = described(
        "the pool label's value on the pool's nodes (a node label value)",
        schema={"pattern": LABEL_VALUE.pattern, "minLength": 1, "maxLength": 63})
    deletion_cost: int = described("the deletion cost of pods on the pool's nodes (int32)",
                                    schema=_INT32)
    protected: bool = described("the scale-down rules guard this pool", False)
    consolidate: str = described(
        "nodes: rank the pool's pods by how cheaply their node empties, inside the pool's "
        "band; none: one flat cost", CONSOLIDATE_NONE, schema={"enum": list(CONSOLIDATE_MODES)})
    band_width: int = described(
        "how many cost values a consolidating pool owns, ending at its deletionCost "
        f"(default {DEFAULT_BAND_WIDTH} when consolidate is nodes)", 1,
        schema={"minimum": 1, "maximum": INT32_MAX})

    @property
    def band(self) -> Band:
        """The costs this pool's pods may carry (see `pool_bands`)."""
        return band_of(self.name, self.deletion_cost, self.band_width, self.protected)

    @property
    def consolidates(self) -> bool:
        return self.consolidate == CONSOLIDATE_NODES


@dataclass(frozen=True)
class Policy:
    pool_label: str = described("the node label whose value names the pool", "node.usage",
                                schema={"pattern": _LABEL_KEY.pattern})
    pools: tuple[Pool, ...] = described("the pools, most protected first", (),
                                        schema={"minItems": 1}, required=True)
    default_deletion_cost: int = described(
        "the cost for nodes without the label, or with a pool not listed", 0, schema=_INT32)
    namespace_selector: Mapping[str, Any] = described(
        "a label selector on namespaces: the governed ones (empty selects all)",
        default_factory=dict, schema=LABEL_SELECTOR_SCHEMA)
    pod_selector: Mapping[str, Any] = described(
        "a label selector on pods and workload templates (empty selects all)",
        default_factory=dict, schema=LABEL_SELECTOR_SCHEMA)
    scale_down: ScaleDownPolicy = described("the scale-down rules and their enforcement",
                                            default_factory=ScaleDownPolicy,
                                            schema={"type": ["object", "null"]})
    gpu_resources: tuple[str, ...] = described(
        "the extended resources that count as GPUs in a node's occupancy",
        DEFAULT_GPU_RESOURCES, schema={"minItems": 1, "items": {"pattern": _RESOURCE_NAME.pattern}})
    rebalance: RebalancePolicy = described(
        "moving settled overflow pods back to their protected pool, whole nodes at a time",
        default_factory=RebalancePolicy, schema={"type": ["object", "null"]})

    @property
    def bands(self) -> list[Band]:
        """Every pool's band, most protected first, then the default's single value."""
        return [pool.band for pool in self.pools] + [Band(None, self.default_deletion_cost,
                                                          self.default_deletion_cost)]

    @property
    def consolidates(self) -> bool:
        """Does any pool rank its pods by node?"""
        return any(pool.consolidates for pool in self.pools)

    def pool_by_name(self, name: str | None) -> Pool | None:
        for pool in self.pools:
            if pool.name == name:
                return pool
        return None

    def pool_of_node(self, node: Mapping[str, Any] | None) -> str | None:
        """The pool label's value on `node`, or None without a node or label."""
        if not node:
            return None
        return labels_of(node).get(self.pool_label)

    def cost_for_pool(self, pool_name: str | None) -> int:
        """The deletion cost pods in `pool_name` get; unknown pools get the default."""
        pool = self.pool_by_name(pool_name)
        return pool.deletion_cost if pool else self.default_deletion_cost

    def is_protected(self, pool_name: str | None) -> bool:
        pool = self.pool_by_name(pool_name)
        return bool(pool and pool.protected)

    @property
    def protected_pool_names(self) -> list[str]:
        return [pool.name for pool in self.pools if pool.protected]


def policy_for(policy: Policy, username: str | None) -> Policy:
    """The policy as it judges `username`: autoscalers and GitOps controllers may have an
    enforcement of their own."""
    mode = policy.scale_down.enforcement_for(username)
    if mode == policy.scale_down.enforcement:
        return policy
    return replace(policy, scale_down=replace(policy.scale_down, enforcement=mode))


def default_policy() -> Policy:
    """The built-in policy used when no file is given."""
    return Policy(
        pool_label="node.usage",
        pools=(Pool("inference", 1000, True),
               Pool("hybrid", -100, False, CONSOLIDATE_NODES, DEFAULT_BAND_WIDTH)),
        default_deletion_cost=0,
    )


_TOP_KEYS = policy_keys(Policy)
_POOL_KEYS = policy_keys(Pool)


def parse_policy(document: Any, source: str = "policy") -> Policy:
    """Validate a policy document (already decoded from YAML) into a Policy."""
    if document is None:
        raise PolicyError(f"{source}: the document is empty")
    if not isinstance(document, Mapping):
        raise PolicyError(f"{source}: must be a mapping, got {type_name(document)}")
    reject_unknown(document, _TOP_KEYS, source, "")
    pool_label = document.get("poolLabel", "node.usage")
    if not isinstance(pool_label, str) or not _LABEL_KEY.match(pool_label):
        raise PolicyError(f"{source}: poolLabel: must be a label key such as node.usage, "
                          f"got {shown(pool_label)}")
    pools = _parse_pools(document.get("pools"), source)
    default_cost = _int32(document.get("defaultDeletionCost", 0), source, "defaultDeletionCost")
    _check_costs_favour_protected(pools, default_cost, source)
    _check_bands(pools, default_cost, source)
    selectors = {}
    for key in ("namespaceSelector", "podSelector"):
        value = _or_empty(document.get(key), {})
        try:
            validate_selector(value, key)
        except SelectorError as err:
            raise PolicyError(f"{source}: {err}") from None
        selectors[key] = value
    try:
        rebalance = parse_rebalance(document.get("rebalance"), pools)
    except RebalancePolicyError as err:
        raise PolicyError(f"{source}: {err}") from None
    return Policy(
        pool_label=pool_label,
        pools=pools,
        default_deletion_cost=default_cost,
        namespace_selector=selectors["namespaceSelector"],
        pod_selector=selectors["podSelector"],
        scale_down=parse_scale_down(_or_empty(document.get("scaleDown"), {}), source),
        gpu_resources=_gpu_resources(document.get("gpuResources", list(DEFAULT_GPU_RESOURCES)),
                                     source),
        rebalance=rebalance,
    )


def _parse_pools(value: Any, source: str) -> tuple[Pool, ...]:
    if not isinstance(value, list) or not value:
        raise PolicyError(f"{source}: pools: must be a non-empty list of pools")
    pools: list[Pool] = []
    for index, item in enumerate(value):
        where = f"pools[{index}]"
        if not isinstance(item, Mapping):
            raise PolicyError(f"{source}: {where}: must be a mapping, got {type_name(item)}")
        reject_unknown(item, _POOL_KEYS, source, where + ".")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise PolicyError(f"{source}: {where}.name: must be a non-empty string")
        if not LABEL_VALUE.match(name):
            raise PolicyError(f"{source}: {where}.name: {name!r} is not a node label value "
                              "(at most 63 letters, digits, '-', '_' or '.', starting and "
                              "ending with a letter or digit), so no node can be in it")
        if any(pool.name == name for pool in pools):
            raise PolicyError(f"{source}: {where}.name: duplicate pool {name!r}")
        if "deletionCost" not in item:
            raise PolicyError(f"{source}: {where}.deletionCost: is required")
        cost = _int32(item["deletionCost"], source, f"{where}.deletionCost")
        protected = item.get("protected", False)
        if not isinstance(protected, bool):
            raise PolicyError(f"{source}: {where}.protected: must be true or false")
        pools.append(Pool(name, cost, protected, *_consolidation(item, source, where)))
    return tuple(pools)


def _consolidation(item: Mapping[str, Any], source: str, where: str) -> tuple[str, int]:
    """(consolidate, bandWidth) of one pool; a pool that does not mention them is flat."""
    mode = item.get("consolidate", CONSOLIDATE_NONE)
    if mode not in CONSOLIDATE_MODES:
        raise PolicyError(f"{source}: {where}.consolidate: must be one of "
                          f"{', '.join(CONSOLIDATE_MODES)}, got {shown(mode)}")
    if mode == CONSOLIDATE_NONE:
        if "bandWidth" in item:
            raise PolicyError(f"{source}: {where}.bandWidth: only a pool with consolidate: "
                              "nodes has a band")
        return mode, 1
    width = _int32(item.get("bandWidth", DEFAULT_BAND_WIDTH), source, f"{where}.bandWidth")
    if width < SLOTS:
        raise PolicyError(f"{source}: {where}.bandWidth: must be at least {SLOTS} "
                          f"(one value per node slot), got {width}")
    try:
        band_of(item.get("name"), item["deletionCost"], width)
    except ValueError as err:
        raise PolicyError(f"{source}: {where}.bandWidth: {err}") from None
    return mode, width


def _check_bands(pools: tuple[Pool, ...], default_cost: int, source: str) -> None:
    """Refuse bands that share a value or put a protected band below an unprotected one."""
    conflict = band_conflict([pool.band for pool in pools] + [Band(None, default_cost,
                                                                   default_cost)])
    if conflict:
        raise PolicyError(f"{source}: pools: {conflict}")


def _gpu_resources(value: Any, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(
            isinstance(name, str) and _RESOURCE_NAME.fullmatch(name) for name in value):
        raise PolicyError(f"{source}: gpuResources: must be a non-empty list of extended "
                          f"resource names such as nvidia.com/gpu, got {shown(value)}")
    return tuple(value)


def _check_costs_favour_protected(pools: tuple[Pool, ...], default_cost: int,
                                  source: str) -> None:
    """Reject a protected pool cheaper to delete than an unprotected pool or the default.

    The ReplicaSet controller deletes lower costs first, so such a cost would make it
    pick the protected pods first: the cost would work against the rules, and most
    scale-downs would be denied. No policy wants that, so it stops the load (a running
    server keeps its last good policy) rather than loading with a warning nobody reads.
    """
    unprotected = [(f"pools[{i}] ({pool.name!r})", pool.deletion_cost)
                   for i, pool in enumerate(pools) if not pool.protected]
    # Nodes without the pool label, or with a pool not listed, are unprotected too.
    unprotected.append(("defaultDeletionCost", default_cost))
    for index, pool in enumerate(pools):
        if not pool.protected:
            continue
        for where, cost in unprotected:
            if pool.deletion_cost < cost:
                raise PolicyError(
                    f"{source}: pools[{index}].deletionCost: protected pool {pool.name!r} has "
                    f"cost {pool.deletion_cost}, lower than {cost} of {where}; the ReplicaSet "
                    "controller deletes lower costs first, so give protected pools the "
                    "highest costs")


def _int32(value: Any, source: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{source}: {where}: must be an integer, got {shown(value)}")
    if not INT32_MIN <= value <= INT32_MAX:
        raise PolicyError(f"{source}: {where}: {value} is outside the int32 range "
                          f"[{INT32_MIN}, {INT32_MAX}] that deletion costs allow")
    return value


def _or_empty(value: Any, empty: Any) -> Any:
    """`empty` for an absent or null value (YAML's `key:`), else the value as written: a
    false, 0 or "" is a wrong type, not an empty one."""
    return empty if value is None else value


