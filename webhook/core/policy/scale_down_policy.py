"""The policy's `scaleDown` section: the rules, their enforcement, and who is answered how.

    scaleDown:
      enforcement: enforce         # enforce | warn | dryrun
      exemptUsers: [...]           # never checked
      autoscalers: {users: [...], enforcement: clamp}
      gitOps: {users: [...], enforcement: warn}

A requester listed in `autoscalers` or `gitOps` is answered by its group's enforcement;
everyone else by the section's own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..objects.deletion_cost import INT32_MAX
from .policy_field import PolicyError, described, policy_keys, reject_unknown, shown, type_name

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
_USER_NAMES = {"items": {"minLength": 1}}


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


_SCALE_KEYS = policy_keys(ScaleDownPolicy)
_AUTOSCALER_KEYS = policy_keys(AutoscalerPolicy)
_GITOPS_KEYS = policy_keys(GitOpsPolicy)


def parse_scale_down(value: Any, source: str) -> ScaleDownPolicy:
    if not isinstance(value, Mapping):
        raise PolicyError(f"{source}: scaleDown: must be a mapping, got {type_name(value)}")
    reject_unknown(value, _SCALE_KEYS, source, "scaleDown.")
    enforcement = value.get("enforcement", "enforce")
    if enforcement not in ENFORCEMENTS:
        raise PolicyError(f"{source}: scaleDown.enforcement: must be one of "
                          f"{', '.join(ENFORCEMENTS)}, got {shown(enforcement)}")
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
        raise PolicyError(f"{where}: must be a mapping, got {type_name(value)}")
    reject_unknown(value, known, source, f"scaleDown.{key}.")
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
                              f"got {shown(value)}")
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PolicyError(f"{where}: must be a non-negative integer or a percentage, "
                          f"got {shown(value)}")
    if value > INT32_MAX:  # a replica count is an int32: no workload could meet it
        raise PolicyError(f"{where}: {value} is more than a replica count can be "
                          f"({INT32_MAX}, the int32 maximum)")
    return value
