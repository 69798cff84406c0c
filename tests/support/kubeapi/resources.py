"""The resources the fake API server serves: their paths, kinds and storage keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.kinds.registry import WORKLOADS

Obj = dict[str, Any]

@dataclass(frozen=True)
class ResourceType:
    plural: str
    kind: str
    api_version: str  # "v1" or "group/version"
    namespaced: bool


RESOURCE_TYPES = (
    ResourceType("pods", "Pod", "v1", True),
    ResourceType("nodes", "Node", "v1", False),
    ResourceType("namespaces", "Namespace", "v1", False),
    ResourceType("events", "Event", "v1", True),
    ResourceType("replicasets", "ReplicaSet", "apps/v1", True),
    ResourceType("deployments", "Deployment", "apps/v1", True),
    ResourceType("statefulsets", "StatefulSet", "apps/v1", True),
    ResourceType("leases", "Lease", "coordination.k8s.io/v1", True),
    ResourceType("secrets", "Secret", "v1", True),
    ResourceType("configmaps", "ConfigMap", "v1", True),
    ResourceType("poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", True),
    ResourceType("mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
                 "admissionregistration.k8s.io/v1", False),
    ResourceType("validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
                 "admissionregistration.k8s.io/v1", False),
)
# Custom resources: served only while their CRD is installed (`install_crd`), as the real
# server answers 404 for a group/version nobody registered.
# Every custom resource of the kind registry.
CUSTOM_RESOURCE_TYPES = tuple(
    ResourceType(r.name, r.kind, r.api_version, r.namespaced) for r in WORKLOADS if r.optional)
BY_PATH = {(t.api_version, t.plural): t for t in RESOURCE_TYPES + CUSTOM_RESOURCE_TYPES}
BY_KIND = {t.kind: t for t in RESOURCE_TYPES + CUSTOM_RESOURCE_TYPES}


def resource_type(kind: str) -> ResourceType:
    """The resource type of `kind` (KeyError for kinds the fake does not serve)."""
    return BY_KIND[kind]


def key_of(rtype: ResourceType, obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name): the object's key in the store; a namespaced object without a
    namespace gets "default"."""
    meta = obj.get("metadata") or {}
    namespace = (meta.get("namespace") or "default") if rtype.namespaced else ""
    if rtype.namespaced:
        obj["metadata"]["namespace"] = namespace  # type: ignore[index]
    return namespace, meta.get("name") or ""


def resource_name(rtype: ResourceType) -> str:
    """The name errors give the resource: `plural.group` (`plural` for the core group)."""
    group = rtype.api_version.rpartition("/")[0]
    return f"{rtype.plural}.{group}" if group else rtype.plural

