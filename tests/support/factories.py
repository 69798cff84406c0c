"""Builders for Kubernetes object dicts in the shape the API server returns them."""

from __future__ import annotations

import hashlib
from typing import Any

from webhook.core.deployment.deployment_util import (
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
)

COST_KEY = "controller.kubernetes.io/pod-deletion-cost"
T0 = "2026-01-01T00:00:00Z"


def uid_for(name: str) -> str:
    digest = hashlib.sha1(name.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def node(name: str, pool: str | None = None, label: str = "node.usage") -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if pool is not None:
        labels[label] = pool
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": uid_for("node/" + name), "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def owner_ref(owner: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


def pod(name: str, namespace: str = "ml", node_name: str | None = "node-1", *,
        owner: dict[str, Any] | None = None, labels: dict[str, str] | None = None,
        phase: str = "Running", ready: bool = True, ready_time: str | None = T0,
        created: str | None = T0, cost: str | None = None, restarts: int = 0,
        annotations: dict[str, str] | None = None, uid: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace,
                                "uid": uid or uid_for(f"{namespace}/{name}")}
    if created:
        metadata["creationTimestamp"] = created
    all_labels = dict(labels or {})
    if owner is not None:
        metadata["ownerReferences"] = [owner_ref(owner)]
        all_labels = {**(owner["spec"]["selector"].get("matchLabels") or {}), **all_labels}
    if all_labels:
        metadata["labels"] = all_labels
    all_annotations = dict(annotations or {})
    if cost is not None:
        all_annotations[COST_KEY] = cost
    if all_annotations:
        metadata["annotations"] = all_annotations
    conditions = [{"type": "Initialized", "status": "True"}]
    ready_condition: dict[str, Any] = {"type": "Ready", "status": "True" if ready else "False"}
    if ready_time:
        ready_condition["lastTransitionTime"] = ready_time
    conditions.append(ready_condition)
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "example/serve:1"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
            "status": {"phase": phase, "conditions": conditions,
                       "containerStatuses": [{"name": "main", "restartCount": restarts,
                                              "ready": ready}]}}


def template(app: str, extra_labels: dict[str, str] | None = None,
             image: str = "example/serve:1") -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app, **(extra_labels or {})}},
            "spec": {"containers": [{"name": "main", "image": image}]}}


def deployment(name: str, namespace: str = "ml", replicas: int = 3, *,
               image: str = "example/serve:1", max_surge: Any = "25%",
               max_unavailable: Any = "25%", strategy: str = "RollingUpdate",
               status_replicas: int | None = None) -> dict[str, Any]:
    spec_strategy: dict[str, Any] = {"type": strategy}
    if strategy == "RollingUpdate":
        spec_strategy["rollingUpdate"] = {"maxSurge": max_surge,
                                          "maxUnavailable": max_unavailable}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "uid": uid_for(f"deploy/{name}"),
                         "creationTimestamp": T0, "generation": 1},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "strategy": spec_strategy, "template": template(name, image=image)},
            "status": {"replicas": replicas if status_replicas is None else status_replicas}}


def replicaset(name: str, namespace: str = "ml", replicas: int = 3, *,
               owner: dict[str, Any] | None = None, app: str | None = None,
               pod_hash: str | None = None, image: str = "example/serve:1",
               created: str = T0, annotations: dict[str, str] | None = None,
               available: int | None = None) -> dict[str, Any]:
    app = app or (owner["metadata"]["name"] if owner else name)
    match = {"app": app}
    if pod_hash:
        match["pod-template-hash"] = pod_hash
    metadata: dict[str, Any] = {"name": name, "namespace": namespace,
                                "uid": uid_for(f"rs/{namespace}/{name}"),
                                "creationTimestamp": created, "labels": dict(match)}
    if owner is not None:
        metadata["ownerReferences"] = [owner_ref(owner)]
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": metadata,
            "spec": {"replicas": replicas, "selector": {"matchLabels": match},
                     "template": template(app, {"pod-template-hash": pod_hash}
                                          if pod_hash else None, image=image)},
            "status": {"replicas": replicas,
                       "availableReplicas": replicas if available is None else available}}


def annotate_rollout(rs: dict[str, Any], desired: int, maximum: int) -> None:
    """The Deployment controller's desired-replicas and max-replicas annotations on `rs`."""
    rs["metadata"].setdefault("annotations", {}).update({
        DESIRED_REPLICAS_ANNOTATION: str(desired), MAX_REPLICAS_ANNOTATION: str(maximum)})


def statefulset(name: str, namespace: str = "ml", replicas: int = 3,
                start: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                            "serviceName": name, "template": template(name),
                            "podManagementPolicy": "OrderedReady"}
    if start is not None:
        spec["ordinals"] = {"start": start}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": namespace, "uid": uid_for(f"sts/{name}"),
                         "creationTimestamp": T0},
            "spec": spec, "status": {"replicas": replicas}}


def kube_list(*objects: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(objects),
            "metadata": {"resourceVersion": ""}}
