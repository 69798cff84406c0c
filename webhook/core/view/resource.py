"""A resource type poolguard reads: the cluster's own, and every workload kind's.

The workload resources are the kind-neutral half of the registry (kinds/registry.py):
what a view needs to tell a workload object from another, without the predictors each
kind's record names. The registry builds its records on them, in this order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Resource:
    """A resource type poolguard reads: its plural, kind, API version and scope."""

    name: str  # the plural, as in the URL
    kind: str
    api_version: str
    namespaced: bool
    # A custom resource whose CRD may not be installed: its absence is normal (the cache
    # and `plan` read it when the API server serves it, and go on without it otherwise).
    optional: bool = False

    @property
    def group(self) -> str:
        """The API group ("" for the core group, e.g. "apps")."""
        return self.api_version.rpartition("/")[0]

    @property
    def path(self) -> str:
        """The cluster-wide collection path, e.g. /api/v1/pods."""
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        return f"{prefix}/{self.name}"


PODS = Resource("pods", "Pod", "v1", True)
NODES = Resource("nodes", "Node", "v1", False)
NAMESPACES = Resource("namespaces", "Namespace", "v1", False)
# Read for every Deployment and Rollout (their pods' owners), whatever the workloads are.
REPLICASETS = Resource("replicasets", "ReplicaSet", "apps/v1", True)

DEPLOYMENTS = Resource("deployments", "Deployment", "apps/v1", True)
STATEFULSETS = Resource("statefulsets", "StatefulSet", "apps/v1", True)
LEADERWORKERSETS = Resource("leaderworkersets", "LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1",
                            True, optional=True)
ROLLOUTS = Resource("rollouts", "Rollout", "argoproj.io/v1alpha1", True, optional=True)
CLONESETS = Resource("clonesets", "CloneSet", "apps.kruise.io/v1alpha1", True, optional=True)
# The workload kinds' resources, in the registry's order (each kind's record names its own).
WORKLOAD_RESOURCES: tuple[Resource, ...] = (
    DEPLOYMENTS, REPLICASETS, STATEFULSETS, LEADERWORKERSETS, ROLLOUTS, CLONESETS)
_WORKLOAD_BY_KIND = {resource.kind: resource for resource in WORKLOAD_RESOURCES}


def workload_resource_of(obj: Mapping[str, Any]) -> Resource | None:
    """The workload resource `obj` is, by kind and, for the custom resources, API group:
    another group's `Rollout` is not an Argo Rollout. (The apps/v1 kinds are taken by kind
    alone, whatever apiVersion a state file gives them.) None for any other object."""
    resource = _WORKLOAD_BY_KIND.get(obj.get("kind") or "")
    if resource is None:
        return None
    api_version = obj.get("apiVersion")
    if (not resource.optional or not isinstance(api_version, str)
            or api_version.rpartition("/")[0] == resource.group):
        return resource
    return None
