"""Who sizes a workload: the controller that owns it, when that is not a Deployment.

A child of a kind some workload kind sizes (a ReplicaSet or StatefulSet: the registry's
`sizes`) whose controller `ownerReference` names another object (an Argo Rollout, a
LeaderWorkerSet, any operator) is sized by that owner: the owner's controller writes its
`spec.replicas` and retries a refused write forever, so a denial stalls the rollout or the
scale instead of protecting anything. A kind whose sizing poolguard models (the
Deployment's proportional split and syncs: its record's `sizing_modelled`) is the
exception, and its controller's own writes are exempt by user name
(`scaleDown.exemptUsers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..kinds.registry import SIZED_KINDS, kind_of_ref
from ..objects.kube import controller_ref, name_of, namespace_of


def sizing_owner(kind: str, workload: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The controller reference of a child some kind sizes (a ReplicaSet, a StatefulSet)
    whose owner's sizing is not modelled here.

    None for other kinds, for workloads without a controller and for children of a kind
    whose sizing poolguard models (a Deployment's ReplicaSets, judged through the
    Deployment's split).
    """
    if kind not in SIZED_KINDS or not workload:
        return None
    ref = controller_ref(workload)
    if ref is None:
        return None
    owner = kind_of_ref(ref)
    return None if owner is not None and owner.sizing_modelled else ref


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
