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
  `poolguard.dev/` keys; merge patches touch only those), and for objects other than
  pods the controller owner reference;
- pods: spec.nodeName and status.phase (the reconciler and the binding handler); what
  the ranking reads (readiness, restarts, times, owner) is in the pod's PodFacts;
- nodes and namespaces: metadata only (pool label, namespace labels);
- workloads: everything but managedFields (the prediction reads templates, strategy,
  status and annotations).

Objects that are not Kubernetes-shaped (a fake server's oddities, hostile input) are
copied as far as they are shaped right; the core's shape checks see the same fields.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ..core.cost.deletion_cost import DELETION_COST_ANNOTATION

POOLGUARD_PREFIX = "poolguard.dev/"
_intern = sys.intern


def compact(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The compact copy of `obj` (a decoded API object of `kind`)."""
    if kind == "Pod":
        return compact_pod(obj)
    if kind in ("Node", "Namespace"):
        return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                "metadata": _metadata(obj.get("metadata"), all_annotations=False)}
    copy = {key: value for key, value in obj.items() if key != "metadata"}
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        copy["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    return copy


def compact_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A pod reduced to what the handlers and the reconciler read (see the module
    docstring); what the ranking reads goes into the pod's `PodFacts` instead."""
    spec = _mapping(pod.get("spec"))
    status = _mapping(pod.get("status"))
    out_spec: dict[str, Any] = {}
    node = spec.get("nodeName")
    if node:
        out_spec["nodeName"] = _interned(node)
    out_status: dict[str, Any] = {}
    phase = status.get("phase")
    if phase is not None:
        out_status["phase"] = _interned(phase)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": _metadata(pod.get("metadata"), all_annotations=False, owners=False),
            "spec": out_spec, "status": out_status}


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
