"""AdmissionReview v1 bodies exactly as the API server sends them."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

ADMIN = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
HPA = {"username": "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
       "uid": "4b8c2f0e-0000-4000-8000-000000000001",
       "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                  "system:authenticated"]}
DEPLOYMENT_CONTROLLER = {
    "username": "system:serviceaccount:kube-system:deployment-controller",
    "uid": "4b8c2f0e-0000-4000-8000-000000000002",
    "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
               "system:authenticated"]}
SCHEDULER = {"username": "system:kube-scheduler", "groups": ["system:authenticated"]}


def _review(request: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": str(uuid.uuid4()), **request}}


def pod_create(pod: dict[str, Any], namespace: str = "ml", dry_run: bool = False,
               user: dict[str, Any] | None = None) -> dict[str, Any]:
    kind = {"group": "", "version": "v1", "kind": "Pod"}
    resource = {"group": "", "version": "v1", "resource": "pods"}
    return _review({
        "kind": kind, "resource": resource, "requestKind": kind, "requestResource": resource,
        "name": pod["metadata"].get("name", ""), "namespace": namespace,
        "operation": "CREATE", "userInfo": user or ADMIN, "object": pod, "oldObject": None,
        "dryRun": dry_run,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    })


def binding(pod_name: str, node_name: str, namespace: str = "ml",
            annotations: dict[str, str] | None = None) -> dict[str, Any]:
    kind = {"group": "", "version": "v1", "kind": "Binding"}
    resource = {"group": "", "version": "v1", "resource": "pods"}
    metadata: dict[str, Any] = {"name": pod_name, "namespace": namespace,
                                "uid": "0d3c1a7e-0000-4000-8000-00000000b1d0"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return _review({
        "kind": kind, "resource": resource, "subResource": "binding", "requestKind": kind,
        "requestResource": resource, "requestSubResource": "binding", "name": pod_name,
        "namespace": namespace, "operation": "CREATE", "userInfo": SCHEDULER,
        "object": {"kind": "Binding", "apiVersion": "v1", "metadata": metadata,
                   "target": {"kind": "Node", "name": node_name}},
        "oldObject": None, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    })


def scale(resource: str, name: str, old_replicas: int, new_replicas: int,
          namespace: str = "ml", user: dict[str, Any] | None = None,
          via: str = "kubectl", dry_run: bool = False,
          selector: str = "app=x", group: str = "apps", version: str = "v1") -> dict[str, Any]:
    """A `/scale` UPDATE: kubectl scale sends a merge PATCH, the HPA a PUT. A custom
    resource's /scale (`group`, `version`) carries the same autoscaling/v1 Scale."""
    kind = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    parent = {"group": group, "version": version, "resource": resource}

    def scale_object(replicas: int) -> dict[str, Any]:
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": name, "namespace": namespace,
                             "uid": "6c1b5f1a-0000-4000-8000-00000000a001",
                             "resourceVersion": "4242",
                             "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"replicas": replicas},
                "status": {"replicas": old_replicas, "selector": selector}}

    options = ({"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager":
                "kubectl-scale"} if via == "kubectl" else
               {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"})
    return _review({
        "kind": kind, "resource": parent, "subResource": "scale", "requestKind": kind,
        "requestResource": parent, "requestSubResource": "scale", "name": name,
        "namespace": namespace, "operation": "UPDATE",
        "userInfo": user or (ADMIN if via == "kubectl" else HPA),
        "object": scale_object(new_replicas), "oldObject": scale_object(old_replicas),
        "dryRun": dry_run, "options": options,
    })


def workload_update(old: dict[str, Any], new: dict[str, Any],
                    user: dict[str, Any] | None = None) -> dict[str, Any]:
    return _workload_review("UPDATE", new, old, user or ADMIN)


def workload_create(obj: dict[str, Any]) -> dict[str, Any]:
    return _workload_review("CREATE", obj, None, ADMIN)


def _workload_review(operation: str, obj: dict[str, Any], old: dict[str, Any] | None,
                     user: dict[str, Any]) -> dict[str, Any]:
    group, _, version = obj.get("apiVersion", "apps/v1").rpartition("/")
    kind = {"group": group, "version": version, "kind": obj["kind"]}
    res = {"group": group, "version": version, "resource": obj["kind"].lower() + "s"}
    return _review({
        "kind": kind, "resource": res, "requestKind": kind, "requestResource": res,
        "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"],
        "operation": operation, "userInfo": user, "object": obj, "oldObject": old,
        "dryRun": False, "options": {"kind": f"{operation.title()}Options",
                                     "apiVersion": "meta.k8s.io/v1"},
    })


def field_paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every path into a JSON document, the root `()` first, then depth-first."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from field_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from field_paths(item, (*prefix, index))


def replaced(document: Any, path: tuple, new: Any) -> Any:
    """A copy of `document` with the value at `path` replaced by `new`."""
    if not path:
        return new
    document = copy.deepcopy(document)
    target = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return document
