"""A resource type poolguard reads, and the ones every kind of workload needs."""

from __future__ import annotations

from dataclasses import dataclass


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
