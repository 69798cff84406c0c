"""The workload kinds poolguard predicts, one record each, and every table derived from them.

Adding a kind is one package under webhook/core (its controller's port and a predictor)
and one record in KINDS; the admission routing, the cache's resources, the state files,
`plan`'s names and help, and the parametrised tests follow from this tuple.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..argorollouts.argo_rollout import referenced_template
from ..argorollouts.prediction import predict_rollout_scale
from ..cloneset.cloneset_pod import POD_CONDITIONS as CLONESET_POD_CONDITIONS
from ..cloneset.cloneset_pod import POD_FIELDS as CLONESET_POD_FIELDS
from ..cloneset.fix import by_specified_delete
from ..cloneset.prediction import predict_cloneset
from ..deployment.prediction import predict_deployment
from ..leaderworkerset.fix import by_group
from ..leaderworkerset.leader_statefulset import with_group_workers
from ..leaderworkerset.prediction import predict_leader_worker_set
from ..model.prediction import ScalePrediction
from ..replicaset.fix import EVERY_POD_GOES, SYNC_ORDER_DECIDES, by_cost
from ..replicaset.prediction import predict_replicaset
from ..statefulset.fix import by_ordinal
from ..statefulset.prediction import predict_statefulset
from ..view.cluster import ClusterView
from ..view.resource import (
    CLONESETS,
    DEPLOYMENTS,
    LEADERWORKERSETS,
    NAMESPACES,
    NODES,
    PODS,
    REPLICASETS,
    ROLLOUTS,
    STATEFULSETS,
    Resource,
    workload_resource_of,
)
from .workload_kind import WorkloadKind

DEPLOYMENT_CONTROLLER = "system:serviceaccount:kube-system:deployment-controller"
ROLLOUTS_CONTROLLER = "system:serviceaccount:argo-rollouts:argo-rollouts"
LWS_CONTROLLER = "system:serviceaccount:lws-system:lws-controller-manager"



def predict_statefulset_with_groups(view: ClusterView, sts: Mapping[str, Any],
                                    to_replicas: int, now_ns: int | None = None,
                                    burst: int = 0) -> ScalePrediction:
    """The StatefulSet controller's victims; when `sts` is a LeaderWorkerSet's leader
    StatefulSet, each leader takes its group's workers (leaderworkerset/
    leader_statefulset.py). The two kinds meet here, so neither package imports the other."""
    return with_group_workers(view, sts, predict_statefulset(view, sts, to_replicas, now_ns,
                                                             burst))


# The words of a kind whose pods are ranked as a ReplicaSet ranks them.
RANKED_AS_REPLICASETS = {"every_pod_goes": EVERY_POD_GOES,
                         "sync_order_decides": SYNC_ORDER_DECIDES}

KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind(DEPLOYMENTS, ("deploy",),
                 predict_deployment,
                 by_cost("kubectl rollout status deployment/{name} -n {namespace}"),
                 template_validated=True,
                 controller_users=(DEPLOYMENT_CONTROLLER,), names_replicasets=True,
                 sizes=("ReplicaSet",), sizing_modelled=True, **RANKED_AS_REPLICASETS),
    WorkloadKind(REPLICASETS, ("rs",), predict_replicaset, by_cost(), template_validated=True,
                 controller_users=(DEPLOYMENT_CONTROLLER, ROLLOUTS_CONTROLLER),
                 names_replicasets=True, **RANKED_AS_REPLICASETS),
    WorkloadKind(STATEFULSETS, ("sts",),
                 predict_statefulset_with_groups, by_ordinal, deletion_cost=False,
                 template_validated=True, controller_users=(LWS_CONTROLLER,),
                 victim_reason="ordinal outside the new range"),
    # sigs.k8s.io/lws: one replica is a group of pods (a leader and its workers).
    WorkloadKind(LEADERWORKERSETS, ("lws",),
                 predict_leader_worker_set, by_group, unit="group",
                 unit_parts=("leader", "workers"), deletion_cost=False,
                 template=("leaderWorkerTemplate", "workerTemplate"),
                 controller_users=(LWS_CONTROLLER,), sizes=("StatefulSet",)),
    # github.com/argoproj/argo-rollouts: a Deployment-like workload that sizes its ReplicaSets.
    WorkloadKind(ROLLOUTS, ("ro",), predict_rollout_scale,
                 by_cost("kubectl argo rollouts status {name} -n {namespace}"),
                 template_ref=referenced_template,
                 controller_users=(ROLLOUTS_CONTROLLER,), sizes=("ReplicaSet",),
                 **RANKED_AS_REPLICASETS),
    # github.com/openkruise/kruise: deletes specified pods and old revisions first, then
    # by rules like a ReplicaSet's (the deletion cost counts).
    WorkloadKind(CLONESETS, ("clone",), predict_cloneset, by_specified_delete,
                 pod_fields=CLONESET_POD_FIELDS, pod_conditions=CLONESET_POD_CONDITIONS,
                 **RANKED_AS_REPLICASETS),
)

WORKLOADS = tuple(kind.resource for kind in KINDS)
# Every resource poolguard reads, in the order a saved state lists them (the example
# state file's order: namespaces, nodes, the apps/v1 workloads, pods), then the custom
# resources, which are there only when their CRDs are installed.
RESOURCES: tuple[Resource, ...] = (
    NAMESPACES, NODES, *(r for r in WORKLOADS if not r.optional), PODS,
    *(r for r in WORKLOADS if r.optional))
WORKLOAD_KINDS = tuple(kind.kind for kind in KINDS)
BY_KIND: dict[str, WorkloadKind] = {kind.kind: kind for kind in KINDS}
# By (API group, resource): another group's "rollouts" is not an Argo Rollout.
BY_RESOURCE: dict[tuple[str, str], WorkloadKind] = {(k.group, k.plural): k for k in KINDS}
WORKLOAD_RESOURCES = {key: kind.kind for key, kind in BY_RESOURCE.items()}
APPS_WORKLOAD_RESOURCES = {key: kind.kind for key, kind in BY_RESOURCE.items()
                           if kind.template_validated}
RESOURCE_OF_KIND = {kind.kind: kind.plural for kind in KINDS}
KIND_ALIASES = {alias: kind.kind for kind in KINDS for alias in kind.aliases}
# The accepted spellings, for messages and --help: long names, then the short ones.
KIND_NAMES = (", ".join(k.kind.lower() for k in KINDS[:-1]) + f" or {KINDS[-1].kind.lower()}")
KIND_SHORT_NAMES = ", ".join(kind.short_names[0] for kind in KINDS)
# The kinds some kind's controller sizes: one of these with a controller owner is sized by it.
SIZED_KINDS = frozenset(child for kind in KINDS for child in kind.sizes)
# What some kind's predictor reads of a pod beyond `PodFacts` (the live cache keeps it).
POD_FIELDS = tuple(dict.fromkeys(path for kind in KINDS for path in kind.pod_fields))
POD_CONDITIONS = frozenset(condition for kind in KINDS for condition in kind.pod_conditions)
# Every controller identity a kind names: who writes some kind's replicas.
CONTROLLER_USERS = frozenset(user for kind in KINDS for user in kind.controller_users)


def kind_named(kind: str | None) -> WorkloadKind | None:
    """The record of a kind (`Deployment`, ...), else None."""
    return BY_KIND.get(kind or "")


def is_workload_object(obj: Mapping[str, Any]) -> bool:
    """Whether `obj` is one of the workloads poolguard reads, by kind and, for the custom
    resources, API group: another group's `Rollout` is not an Argo Rollout. (The apps/v1
    kinds are taken by kind alone, whatever apiVersion a state file gives them.)"""
    return kind_of_object(obj) is not None


def kind_of_object(obj: Mapping[str, Any]) -> WorkloadKind | None:
    """The record of the workload kind `obj` is (see `is_workload_object`), else None."""
    resource = workload_resource_of(obj)
    return None if resource is None else BY_KIND[resource.kind]


def kind_of_ref(ref: Mapping[str, Any]) -> WorkloadKind | None:
    """The record of the kind an owner reference names, else None. A reference without
    apiVersion, or with the core group, is read as an apps/v1 kind's (never a custom
    resource's)."""
    kind = BY_KIND.get(ref.get("kind") or "")
    if kind is None:
        return None
    group = str(ref.get("apiVersion") or kind.resource.api_version).rpartition("/")[0]
    return kind if group == kind.group or (group == "" and not kind.custom) else None


def canonical_kind(kind: str) -> str | None:
    """The workload kind (e.g. `Deployment`, `LeaderWorkerSet`) for any accepted
    spelling, else None."""
    return KIND_ALIASES.get(kind.lower())


def workload_kind(group: str | None, resource: str | None,
                  kinds: Mapping[tuple[str, str], str] = WORKLOAD_RESOURCES) -> str | None:
    """The workload kind an admission request's `resource` (group and plural) names.

    The API server always sends the group; a request without one is read as the apps/v1
    resource of that name, as it always was (never as a custom resource).
    """
    if not isinstance(resource, str):
        return None
    if group is None:
        group = "apps"
    return kinds.get((group, resource))


def exempt_users_for(kind: str, exempt_users: tuple[str, ...] | list[str]) -> list[str]:
    """The exempt users who may scale a workload of `kind`: a controller the registry
    knows as another kind's (the Deployment controller, for a LeaderWorkerSet) never
    does."""
    record = BY_KIND.get(kind)
    own = record.controller_users if record else ()
    return [user for user in exempt_users if user not in CONTROLLER_USERS or user in own]
