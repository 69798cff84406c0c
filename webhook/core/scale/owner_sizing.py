"""Who sizes a workload: the controller that owns it, when that is not a Deployment.

A ReplicaSet or StatefulSet whose controller `ownerReference` names another object (an
Argo Rollout, a LeaderWorkerSet, a CloneSet, any operator) is sized by that owner: the
owner's controller writes its `spec.replicas` and retries a refused write forever, so a
denial stalls the rollout or the scale instead of protecting anything. The Deployment
controller is the exception poolguard models (its proportional split and syncs), and its
own writes are exempt by user name (`scaleDown.exemptUsers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..objects.kube import controller_ref, name_of, namespace_of

OWNED_KINDS = ("ReplicaSet", "StatefulSet")


def is_deployment_ref(ref: Mapping[str, Any]) -> bool:
    """True for an owner reference to an apps/v1 Deployment (or one without apiVersion)."""
    group = str(ref.get("apiVersion") or "apps/v1").rpartition("/")[0]
    return ref.get("kind") == "Deployment" and group in ("apps", "")


def sizing_owner(kind: str, workload: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The controller reference of a ReplicaSet or StatefulSet owned by a non-Deployment.

    None for other kinds, for workloads without a controller and for Deployment-owned
    ReplicaSets (poolguard judges those through the Deployment's own model).
    """
    if kind not in OWNED_KINDS or not workload:
        return None
    ref = controller_ref(workload)
    if ref is None or is_deployment_ref(ref):
        return None
    return ref


def owner_warnings(kind: str, workload: Mapping[str, Any],
                   ref: Mapping[str, Any]) -> list[str]:
    """What a requester is told when an owner-sized workload's replicas change.

    The requester may be the owner's controller or a person: the first line is for both,
    the second is what a person's direct scale leads to.
    """
    owner = f"{ref.get('kind') or 'object'} {ref.get('name') or '<unnamed>'}"
    api = ref.get("apiVersion")
    where = f"{kind} {namespace_of(workload)}/{name_of(workload)}"
    return [f"poolguard: allowed unchecked: {where} is sized by its owner {owner}"
            f"{f' ({api})' if api else ''}; poolguard never blocks an owner's writes",
            f"poolguard: {kind} {name_of(workload)} is managed by {owner}, "
            "which will undo a direct scale"]
