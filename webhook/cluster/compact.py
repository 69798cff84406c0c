"""Compact copies of watched objects: only the fields poolguard reads, built once per event.

The API server sends pods of several kilobytes (managedFields alone are often a third);
a cache of 150,000 of them as decoded JSON would take gigabytes and make every full
garbage collection last seconds. The live cache keeps instead, per object, a small dict
of the fields the core, the admission handlers and the reconciler read (same shape as
the API object, so every reader works unchanged), and for pods the `PodFacts` the
ranking needs. Strings that repeat across objects (namespaces, node names, label keys
and values, owner names) are interned, so a thousand pods share one copy.

What is kept, and who reads it:
- metadata: name, namespace, uid, resourceVersion, deletionTimestamp, labels
  (selectors), the annotations poolguard decides on (the deletion cost and its own
  `poolguard.dev/` keys; merge patches touch only those), and the controller owner
  reference;
- pods: spec.nodeName and status.phase (the reconciler and the binding handler), the
  controller reference and the containers' extended-resource requests and limits (what
  node occupancy counts: GPUs, and whose pods they are); what the ranking reads
  (readiness, restarts, times) is in the pod's PodFacts; what a workload kind's
  predictor reads beyond that (its record's `pod_fields` and `pod_conditions`, such as
  a CloneSet's finalizers and InPlaceUpdateReady condition), so that live and
  state-file predictions agree;
- nodes: metadata and the extended resources of status.allocatable (GPUs offered);
- namespaces: metadata only (namespace labels);
- workloads: everything but managedFields (the prediction reads templates, strategy,
  status and annotations).

Objects that are not Kubernetes-shaped (a fake server's oddities, hostile input) are
copied as far as they are shaped right; the core's shape checks see the same fields.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ..core.kinds.registry import POD_CONDITIONS, POD_FIELDS
from ..core.objects.deletion_cost import DELETION_COST_ANNOTATION

POOLGUARD_PREFIX = "poolguard.dev/"
_intern = sys.intern


def compact(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The compact copy of `obj` (a decoded API object of `kind`)."""
    if kind == "Pod":
        return compact_pod(obj)
    if kind in ("Node", "Namespace"):
        copy = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                "metadata": _metadata(obj.get("metadata"), all_annotations=False)}
        allocatable = _extended(_mapping(obj.get("status")).get("allocatable"))
        if allocatable:
            copy["status"] = {"allocatable": allocatable}
        return copy
    copy = {key: value for key, value in obj.items() if key != "metadata"}
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        copy["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    return copy


def compact_pod(pod: Mapping[str, Any], fields: tuple[str, ...] = POD_FIELDS,
                conditions: frozenset[str] = POD_CONDITIONS) -> dict[str, Any]:
    """A pod reduced to what the handlers and the reconciler read (see the module
    docstring), and the `fields` and `conditions` the kinds' predictors read; what the
    ranking reads goes into the pod's `PodFacts` instead."""
    spec = _mapping(pod.get("spec"))
    status = _mapping(pod.get("status"))
    out_spec: dict[str, Any] = {}
    node = spec.get("nodeName")
    if node:
        out_spec["nodeName"] = _interned(node)
    for field in ("containers", "initContainers"):
        containers = [_container_resources(c) for c in spec.get(field) or ()
                      if isinstance(c, Mapping)]
        if any(containers):
            out_spec[field] = containers
    out_status: dict[str, Any] = {}
    phase = status.get("phase")
    if phase is not None:
        out_status["phase"] = _interned(phase)
    kept = [c for c in status.get("conditions") or () if isinstance(c, Mapping)
            and c.get("type") in conditions]
    if kept:
        out_status["conditions"] = kept
    out = {"apiVersion": "v1", "kind": "Pod",
           "metadata": _metadata(pod.get("metadata"), all_annotations=False),
           "spec": out_spec, "status": out_status}
    for path in fields:
        _copy_path(pod, out, path.split("."))
    return out


def _copy_path(source: Mapping[str, Any], target: dict[str, Any], keys: list[str]) -> None:
    """Copy `source`'s value at `keys` into `target`, making the maps on the way."""
    *parents, last = keys
    for key in parents:
        source = _mapping(source.get(key))
        target = target.setdefault(key, {})
    if last in source:
        target[last] = source[last]


def _container_resources(container: Mapping[str, Any]) -> dict[str, Any]:
    """A container's extended-resource requests and limits (and a sidecar's restartPolicy)."""
    resources = _mapping(container.get("resources"))
    kept: dict[str, Any] = {}
    for key in ("requests", "limits"):
        extended = _extended(resources.get(key))
        if extended:
            kept[key] = extended
    out: dict[str, Any] = {"resources": kept} if kept else {}
    if out and container.get("restartPolicy") is not None:
        out["restartPolicy"] = container.get("restartPolicy")
    return out


def _extended(quantities: Any) -> dict[str, Any]:
    """The extended resources (names with a domain, such as nvidia.com/gpu) of a list."""
    return {_interned(k): v for k, v in _mapping(quantities).items()
            if isinstance(k, str) and "/" in k}


def _metadata(metadata: Any, all_annotations: bool, owners: bool = True) -> dict[str, Any]:
    metadata = _mapping(metadata)
    out: dict[str, Any] = {}
    for key in ("name", "uid", "resourceVersion", "deletionTimestamp"):
        if key in metadata:
            out[key] = metadata[key]
    namespace = metadata.get("namespace")
    if namespace is not None:
        out["namespace"] = _intern(namespace) if isinstance(namespace, str) else namespace
    labels = metadata.get("labels")
    if isinstance(labels, Mapping):
        out["labels"] = {_interned(k): _interned(v) for k, v in labels.items()}
    annotations = metadata.get("annotations")
    if isinstance(annotations, Mapping):
        kept = {k: v for k, v in annotations.items()
                if all_annotations or k == DELETION_COST_ANNOTATION
                or (isinstance(k, str) and k.startswith(POOLGUARD_PREFIX))}
        if kept:
            out["annotations"] = kept
    references = metadata.get("ownerReferences") if owners else None
    if isinstance(references, list):
        controller = [{k: _interned(v) for k, v in ref.items()} for ref in references
                      if isinstance(ref, Mapping) and ref.get("controller")]
        if controller:
            out["ownerReferences"] = controller[:1]
    return out


def _interned(value: Any) -> Any:
    return _intern(value) if isinstance(value, str) else value


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
