"""Builders for OpenKruise CloneSets and their pods, in the shape the API server returns them."""

from __future__ import annotations

from typing import Any

from tests.support import factories as f

API_VERSION = "apps.kruise.io/v1alpha1"
NEW, OLD = "llm-new", "llm-old"  # revision names (the pods' controller-revision-hash)


def cloneset(name: str = "llm", namespace: str = "ml", replicas: int = 3, *,
             update_revision: str = NEW, current_revision: str | None = None,
             spec: dict[str, Any] | None = None, labels: dict[str, str] | None = None
             ) -> dict[str, Any]:
    """A CloneSet with a status as its controller writes it (update and current revision)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace,
                                "uid": f.uid_for(f"cloneset/{namespace}/{name}")}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": API_VERSION, "kind": "CloneSet", "metadata": metadata,
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": f.template(name), **(spec or {})},
            "status": {"replicas": replicas, "updateRevision": update_revision,
                       "currentRevision": current_revision or update_revision}}


def clone_pod(owner: dict[str, Any], name: str, node_name: str | None = "node-1", *,
              revision: str = NEW, state: str = "Normal", specified: bool = False,
              finalizers: list[str] | None = None, labels: dict[str, str] | None = None,
              **kwargs: Any) -> dict[str, Any]:
    """A pod of `owner` (a CloneSet) with the labels its controller sets."""
    all_labels = {"controller-revision-hash": revision, **(labels or {})}
    if state:
        all_labels["lifecycle.apps.kruise.io/state"] = state
    if specified:
        all_labels["apps.kruise.io/specified-delete"] = "true"
    pod = f.pod(name, owner["metadata"]["namespace"], node_name, owner=owner,
                labels=all_labels, **kwargs)
    if finalizers:
        pod["metadata"]["finalizers"] = list(finalizers)
    return pod
