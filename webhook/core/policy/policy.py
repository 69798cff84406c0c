"""The pool policy: its shape, validation with field-named errors, and pool lookups.

Size: the model and its parser are read together: each field carries the schema facts the
parser's keys and `policy_schema` derive from, and each parse step sits beside the field it
fills, so a new field is one edit in one file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

from ..consolidation.node_occupancy import DEFAULT_GPU_RESOURCES
from ..consolidation.node_rank import SLOTS as MIN_BAND_WIDTH
from ..consolidation.pool_bands import (
    CONSOLIDATE_MODES,
    CONSOLIDATE_NODES,
    CONSOLIDATE_NONE,
    DEFAULT_BAND_WIDTH,
    Band,
    band_conflict,
    band_of,
)
from ..errors import InputError
from ..objects.deletion_cost import INT32_MAX, INT32_MIN
from ..objects.kube import labels_of
from ..objects.selectors import LABEL_SELECTOR_SCHEMA, SelectorError, validate_selector
from .rebalance_policy import RebalancePolicy, RebalancePolicyError, parse_rebalance

ENFORCEMENTS = ("enforce", "warn", "dryrun")
DEFAULT_EXEMPT_USERS = ("system:serviceaccount:kube-system:deployment-controller",)
AUTOSCALER_ENFORCEMENTS = ("clamp", *ENFORCEMENTS)
# The autoscalers' identities as their own sources name them:
# - the HPA: kube-controller-manager with --use-service-account-credentials runs it as the
#   ServiceAccount "horizontal-pod-autoscaler" in kube-system (kubernetes
#   plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go); it PUTs /scale;
# - KEDA: the ServiceAccount "keda-operator" in namespace "keda" (kedacore/keda
#   config/rbac/role_binding.yaml); it scales to and from zero itself through /scale;
# - Knative: the autoscaler Deployment runs as the ServiceAccount "controller" in
#   "knative-serving" (knative/serving config/core/deployments/autoscaler.yaml) and sends a
#   JSON patch of the Deployment's spec.replicas (pkg/reconciler/autoscaling/kpa/scaler.go).
DEFAULT_AUTOSCALER_USERS = (
    "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
    "system:serviceaccount:keda:keda-operator",
    "system:serviceaccount:knative-serving:controller",
)
# GitOps tools re-apply the replica count in Git on every sync and retry a refused write
# (Argo CD's application controller, Flux's kustomize- and helm-controller): a denial is
# answered with the same write again and again. None is listed by default: an admin opts a
# tool in, and a person's scale-down of the same workload stays judged as before.
GITOPS_ENFORCEMENTS = AUTOSCALER_ENFORCEMENTS
_PERCENT = re.compile(r"([0-9]{1,3})%")  # used with fullmatch: "$" allows a "\n"
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
# A pool name is a node label value (no node is in a pool its label cannot name), which
# also makes it a valid part of a ConfigMap key (the admission policy's params).
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class PolicyError(InputError):
    """A policy document that cannot be used; the message names the field."""


def described(description: str, default: Any = MISSING, *, key: str | None = None,
              schema: Mapping[str, Any] | None = None, default_factory: Any = MISSING,
              required: bool = False) -> Any:
    """A policy field with what its JSON Schema says beyond its Python type.

    `key` is its name in the policy file (default: the field's name in camelCase);
    `schema` adds keywords (enum, pattern, range) to those the type gives; `required`: a
    policy file must set it even though the model has a default. The parser's field names
    and policy_schema's JSON Schema both come from here.
    """
    metadata = {"description": description, "key": key, "schema": dict(schema or {}),
                "required": required}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


_INT32 = {"minimum": INT32_MIN, "maximum": INT32_MAX}
_RESOURCE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*"
                            r"[A-Za-z0-9])?")
_USER_NAMES = {"items": {"minLength": 1}}


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
class AutoscalerPolicy:
    """Requests by these users are clamped to the safe count (or judged by `enforcement`)."""

    users: tuple[str, ...] = described(
        "users whose scale-downs are clamped to the safe count instead of denied",
        DEFAULT_AUTOSCALER_USERS, schema=_USER_NAMES)
    enforcement: str = described("how the listed autoscalers' scale-downs are answered",
                                 "clamp", schema={"enum": list(AUTOSCALER_ENFORCEMENTS)})


@dataclass(frozen=True)
class GitOpsPolicy:
    """Requests by these users (GitOps controllers) are warned (or judged by `enforcement`)."""

    users: tuple[str, ...] = described(
        "GitOps controllers' users (Argo CD, Flux) whose scale-downs are answered by "
        "enforcement, so that a refused sync is not retried forever", (), schema=_USER_NAMES)
    enforcement: str = described(
        "how the listed GitOps controllers' scale-downs are answered (clamp makes a GitOps "
        "tool see perpetual drift: warn is the default)", "warn",
        schema={"enum": list(GITOPS_ENFORCEMENTS)})


@dataclass(frozen=True)
class ScaleDownPolicy:
    enforcement: str = described(
        "enforce denies, warn allows with warnings, dryrun allows and only audits",
        "enforce", schema={"enum": list(ENFORCEMENTS)})
    protected_last: bool = described(
        "deny removing a protected-pool pod while a pod of the workload survives outside "
        "protected pools", True)
    min_protected_replicas: int | str = described(
        "pods that must remain on protected pools: an integer, or a percentage of the new "
        "replica count (rounded up)", 0,
        schema={"oneOf": [{"type": "integer", "minimum": 0, "maximum": INT32_MAX},
                          {"type": "string", "pattern": r"^([0-9]{1,2}|0[0-9]{2}|100)%$"}]})
    exempt_users: tuple[str, ...] = described(
        "users whose requests are never checked (the Deployment controller's own "
        "ReplicaSet updates)", DEFAULT_EXEMPT_USERS, schema=_USER_NAMES)
    autoscalers: AutoscalerPolicy = described(
        "autoscalers and how their scale-downs are answered",
        default_factory=AutoscalerPolicy)
    git_ops: GitOpsPolicy = described(
        "GitOps controllers and how their scale-downs are answered",
        default_factory=GitOpsPolicy)

    def _listed_group(self, username: str | None
                      ) -> tuple[str, AutoscalerPolicy | GitOpsPolicy] | None:
        """The requester group `username` is listed in, as (field name, its policy)."""
        if username is None:
            return None
        for field_name, group in (("autoscalers", self.autoscalers), ("gitOps", self.git_ops)):
            if username in group.users:
                return field_name, group
        return None

    def requester_group(self, username: str | None) -> str | None:
        """The requester group `username` is listed in, by its field name (`autoscalers`,
        `gitOps`), else None: a person, CI, anyone not listed."""
        listed = self._listed_group(username)
        return None if listed is None else listed[0]

    def requester_enforcement(self, username: str | None) -> str | None:
        """The enforcement of the requester group `username` is listed in, else None."""
        listed = self._listed_group(username)
        return None if listed is None else listed[1].enforcement

    def clamps(self, username: str | None) -> bool:
        """Is `username` a listed requester whose unsafe scale-downs are clamped?"""
        return self.requester_enforcement(username) == "clamp"

    def enforcement_for(self, username: str | None) -> str:
        """How a violation by `username` is answered in /validate-scale.

        A requester under `clamp` is judged as everyone else: its request reaches the
        validating webhook already clamped, unless /mutate-scale was skipped (failure
        policy Ignore), and then the next sync is clamped.
        """
        mode = self.requester_enforcement(username)
        if mode is not None and mode != "clamp":
            return mode
        return self.enforcement

    def required_protected(self, replicas: int) -> int:
        """Pods that must stay on protected pools at `replicas` (percentages round up)."""
        value = self.min_protected_replicas
        if isinstance(value, str):
            percent = int(value[:-1])
            return math.ceil(replicas * percent / 100)
        return value


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


def policy_key(model_field: Any) -> str:
    """A model field's name in the policy file."""
    key = model_field.metadata.get("key")
    if key:
        return str(key)
    head, *rest = model_field.name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def policy_keys(model: type) -> set[str]:
    """The keys a policy file may use in the object `model` describes."""
    return {policy_key(model_field) for model_field in fields(model)}


_TOP_KEYS = policy_keys(Policy)
_POOL_KEYS = policy_keys(Pool)
_SCALE_KEYS = policy_keys(ScaleDownPolicy)
_AUTOSCALER_KEYS = policy_keys(AutoscalerPolicy)
_GITOPS_KEYS = policy_keys(GitOpsPolicy)


def parse_policy(document: Any, source: str = "policy") -> Policy:
    """Validate a policy document (already decoded from YAML) into a Policy."""
    if document is None:
        raise PolicyError(f"{source}: the document is empty")
    if not isinstance(document, Mapping):
        raise PolicyError(f"{source}: must be a mapping, got {_type_name(document)}")
    _reject_unknown(document, _TOP_KEYS, source, "")
    pool_label = document.get("poolLabel", "node.usage")
    if not isinstance(pool_label, str) or not _LABEL_KEY.match(pool_label):
        raise PolicyError(f"{source}: poolLabel: must be a label key such as node.usage, "
                          f"got {_shown(pool_label)}")
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
        scale_down=_parse_scale_down(_or_empty(document.get("scaleDown"), {}), source),
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
            raise PolicyError(f"{source}: {where}: must be a mapping, got {_type_name(item)}")
        _reject_unknown(item, _POOL_KEYS, source, where + ".")
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
                          f"{', '.join(CONSOLIDATE_MODES)}, got {_shown(mode)}")
    if mode == CONSOLIDATE_NONE:
        if "bandWidth" in item:
            raise PolicyError(f"{source}: {where}.bandWidth: only a pool with consolidate: "
                              "nodes has a band")
        return mode, 1
    width = _int32(item.get("bandWidth", DEFAULT_BAND_WIDTH), source, f"{where}.bandWidth")
    if width < MIN_BAND_WIDTH:
        raise PolicyError(f"{source}: {where}.bandWidth: must be at least {MIN_BAND_WIDTH} "
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
                          f"resource names such as nvidia.com/gpu, got {_shown(value)}")
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


def _parse_scale_down(value: Any, source: str) -> ScaleDownPolicy:
    if not isinstance(value, Mapping):
        raise PolicyError(f"{source}: scaleDown: must be a mapping, got {_type_name(value)}")
    _reject_unknown(value, _SCALE_KEYS, source, "scaleDown.")
    enforcement = value.get("enforcement", "enforce")
    if enforcement not in ENFORCEMENTS:
        raise PolicyError(f"{source}: scaleDown.enforcement: must be one of "
                          f"{', '.join(ENFORCEMENTS)}, got {_shown(enforcement)}")
    protected_last = value.get("protectedLast", True)
    if not isinstance(protected_last, bool):
        raise PolicyError(f"{source}: scaleDown.protectedLast: must be true or false")
    exempt = value.get("exemptUsers", list(DEFAULT_EXEMPT_USERS))
    if not isinstance(exempt, list) or not all(isinstance(u, str) and u for u in exempt):
        raise PolicyError(f"{source}: scaleDown.exemptUsers: must be a list of user names")
    autoscalers = AutoscalerPolicy(*_parse_requesters(
        value.get("autoscalers", {}), source, "autoscalers", _AUTOSCALER_KEYS,
        DEFAULT_AUTOSCALER_USERS, "clamp"))
    git_ops = GitOpsPolicy(*_parse_requesters(
        value.get("gitOps", {}), source, "gitOps", _GITOPS_KEYS, (), "warn"))
    _check_one_answer_per_user(exempt, autoscalers, git_ops, source)
    return ScaleDownPolicy(
        enforcement=enforcement,
        protected_last=protected_last,
        min_protected_replicas=_min_protected(value.get("minProtectedReplicas", 0), source),
        exempt_users=tuple(exempt),
        autoscalers=autoscalers,
        git_ops=git_ops,
    )


def _parse_requesters(value: Any, source: str, key: str, known: set[str],
                      default_users: tuple[str, ...],
                      default_enforcement: str) -> tuple[tuple[str, ...], str]:
    """(users, enforcement) of a requester group: `scaleDown.autoscalers` or `.gitOps`."""
    where = f"{source}: scaleDown.{key}"
    if not isinstance(value, Mapping):
        raise PolicyError(f"{where}: must be a mapping, got {_type_name(value)}")
    _reject_unknown(value, known, source, f"scaleDown.{key}.")
    users = value.get("users", list(default_users))
    if not isinstance(users, list) or not all(isinstance(u, str) and u for u in users):
        raise PolicyError(f"{where}.users: must be a list of user names")
    enforcement = value.get("enforcement", default_enforcement)
    if enforcement not in AUTOSCALER_ENFORCEMENTS:
        raise PolicyError(f"{where}.enforcement: must be one of "
                          f"{', '.join(AUTOSCALER_ENFORCEMENTS)}, got {enforcement!r}")
    return tuple(users), enforcement


def _check_one_answer_per_user(exempt: list[str], autoscalers: AutoscalerPolicy,
                               git_ops: GitOpsPolicy, source: str) -> None:
    """Refuse a user listed in two requester groups: each group answers differently, and
    a policy must not leave to list order which answer a requester gets."""
    for index, user in enumerate(autoscalers.users):
        if user in exempt:
            raise PolicyError(
                f"{source}: scaleDown.autoscalers.users[{index}]: {user!r} is also in "
                "scaleDown.exemptUsers, whose requests are never checked, so it would never "
                "be clamped; list it in one of the two")
    for index, user in enumerate(git_ops.users):
        where = f"{source}: scaleDown.gitOps.users[{index}]: {user!r} is also in"
        if user in exempt:
            raise PolicyError(
                f"{where} scaleDown.exemptUsers, whose requests are never checked, so its "
                "enforcement would never apply; list it in one of the two")
        if user in autoscalers.users:
            raise PolicyError(
                f"{where} scaleDown.autoscalers.users, which has an enforcement of its own; "
                "list it in one of the two")


def _min_protected(value: Any, source: str) -> int | str:
    where = f"{source}: scaleDown.minProtectedReplicas"
    if isinstance(value, str):
        match = _PERCENT.fullmatch(value)
        if not match or int(match.group(1)) > 100:
            raise PolicyError(f"{where}: must be an integer or a percentage from 0% to 100%, "
                              f"got {_shown(value)}")
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PolicyError(f"{where}: must be a non-negative integer or a percentage, "
                          f"got {_shown(value)}")
    if value > INT32_MAX:  # a replica count is an int32: no workload could meet it
        raise PolicyError(f"{where}: {value} is more than a replica count can be "
                          f"({INT32_MAX}, the int32 maximum)")
    return value


def _int32(value: Any, source: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{source}: {where}: must be an integer, got {_shown(value)}")
    if not INT32_MIN <= value <= INT32_MAX:
        raise PolicyError(f"{source}: {where}: {value} is outside the int32 range "
                          f"[{INT32_MIN}, {INT32_MAX}] that deletion costs allow")
    return value


def _reject_unknown(mapping: Mapping[str, Any], known: set[str], source: str, prefix: str) -> None:
    unknown = sorted(str(k) for k in mapping if k not in known)
    if unknown:
        raise PolicyError(f"{source}: {prefix}{unknown[0]}: unknown field "
                          f"(known: {', '.join(sorted(known))})")


def _or_empty(value: Any, empty: Any) -> Any:
    """`empty` for an absent or null value (YAML's `key:`), else the value as written: a
    false, 0 or "" is a wrong type, not an empty one."""
    return empty if value is None else value


def _type_name(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number",
            bool: "a boolean", type(None): "an empty value"}.get(type(value),
                                                                  type(value).__name__)


def _shown(value: Any) -> str:
    """A value as the YAML a person wrote (Python's None, True and [...] mean nothing there)."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, int | float):
        return str(value)
    return _type_name(value)
