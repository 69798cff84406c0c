"""Type checks for the fields of Kubernetes objects that poolguard reads.

The API server only ever sends well-typed objects, but a hostile AdmissionReview or a
hand-edited state file may not; checking up front turns a would-be crash deep in the
ranking into an error that names the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InputError
from .kube import parse_time_ns


class ShapeError(InputError):
    """A field poolguard reads has the wrong type; the message names it."""


_KIND_NAMES = {str: "a string", Mapping: "an object", list: "a list", int: "an integer"}


def check_placement_shape(obj: Mapping[str, Any], where: str) -> None:
    """The fields the pod and binding webhooks read: labels, annotations, placement."""
    metadata = _mapping(obj, "metadata", where)
    for key in ("labels", "annotations"):
        _string_map(metadata, key, f"{where}.metadata")
    spec = _mapping(obj, "spec", where)
    _typed(spec, "nodeName", str, f"{where}.spec")
    _string_map(spec, "nodeSelector", f"{where}.spec")
    _check_affinity(spec, f"{where}.spec")


def check_object_shape(obj: Mapping[str, Any], where: str) -> None:
    """Raise ShapeError naming the first field poolguard reads that has the wrong type."""
    metadata = _mapping(obj, "metadata", where)
    for key in ("labels", "annotations"):
        _string_map(metadata, key, f"{where}.metadata")
    for key in ("name", "namespace", "uid", "resourceVersion"):
        _typed(metadata, key, str, f"{where}.metadata")
    _time(metadata, "creationTimestamp", f"{where}.metadata")
    _time(metadata, "deletionTimestamp", f"{where}.metadata")
    for i, ref in enumerate(_list(metadata, "ownerReferences", f"{where}.metadata")):
        if not isinstance(ref, Mapping):
            raise ShapeError(f"{where}.metadata.ownerReferences[{i}]: must be an object")
    spec = _mapping(obj, "spec", where)
    _check_spec(spec, f"{where}.spec")
    _check_status(_mapping(obj, "status", where), f"{where}.status")


def _check_spec(spec: Mapping[str, Any], where: str) -> None:
    _typed(spec, "nodeName", str, where)
    _count(spec, "replicas", where)
    _string_map(spec, "nodeSelector", where)
    selector = _mapping(spec, "selector", where)
    _string_map(selector, "matchLabels", f"{where}.selector")
    _expressions(selector, f"{where}.selector")
    _check_affinity(spec, where)
    for key in ("containers", "initContainers"):
        for i, container in enumerate(_list(spec, key, where)):
            if not isinstance(container, Mapping):
                raise ShapeError(f"{where}.{key}[{i}]: must be an object")
            resources = _mapping(container, "resources", f"{where}.{key}[{i}]")
            for part in ("requests", "limits"):
                _mapping(resources, part, f"{where}.{key}[{i}].resources")
    # What the rebalance plan reads of a pod and a node: scheduling constraints, overhead.
    for key in ("tolerations", "taints"):
        for i, item in enumerate(_list(spec, key, where)):
            if not isinstance(item, Mapping):
                raise ShapeError(f"{where}.{key}[{i}]: must be an object")
    _mapping(spec, "overhead", where)
    _mapping(spec, "strategy", where)
    # A LeaderWorkerSet's group size decides which pods a scale-down removes.
    group = _mapping(spec, "leaderWorkerTemplate", where)
    _count(group, "size", f"{where}.leaderWorkerTemplate")
    _mapping(spec, "ordinals", where)
    template = _mapping(spec, "template", where)
    template_metadata = _mapping(template, "metadata", f"{where}.template")
    for key in ("labels", "annotations"):
        _string_map(template_metadata, key, f"{where}.template.metadata")


def _check_affinity(spec: Mapping[str, Any], where: str) -> None:
    affinity = _mapping(spec, "affinity", where)
    node_affinity = _mapping(affinity, "nodeAffinity", f"{where}.affinity")
    required = _mapping(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution",
                        f"{where}.affinity.nodeAffinity")
    terms_where = f"{where}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    for i, term in enumerate(_list(required, "nodeSelectorTerms", terms_where)):
        term_where = f"{terms_where}.nodeSelectorTerms[{i}]"
        if not isinstance(term, Mapping):
            raise ShapeError(f"{term_where}: must be an object")
        _expressions(term, term_where)
        _expressions(term, term_where, "matchFields")
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    preferred_where = f"{where}.affinity.nodeAffinity.{preferred}"
    for i, term in enumerate(_list(node_affinity, preferred, f"{where}.affinity.nodeAffinity")):
        if not isinstance(term, Mapping):
            raise ShapeError(f"{preferred_where}[{i}]: must be an object")
        _expressions(_mapping(term, "preference", f"{preferred_where}[{i}]"),
                     f"{preferred_where}[{i}].preference")


def _check_status(status: Mapping[str, Any], where: str) -> None:
    _typed(status, "phase", str, where)
    for key in ("allocatable", "capacity"):
        _mapping(status, key, where)
    for key in ("replicas", "availableReplicas"):
        _count(status, key, where)
    for i, condition in enumerate(_list(status, "conditions", where)):
        if not isinstance(condition, Mapping):
            raise ShapeError(f"{where}.conditions[{i}]: must be an object")
        _time(condition, "lastTransitionTime", f"{where}.conditions[{i}]")
    for key in ("containerStatuses", "initContainerStatuses"):
        for i, container in enumerate(_list(status, key, where)):
            if not isinstance(container, Mapping):
                raise ShapeError(f"{where}.{key}[{i}]: must be an object")
            _count(container, "restartCount", f"{where}.{key}[{i}]")


def _expressions(parent: Mapping[str, Any], where: str, key: str = "matchExpressions") -> None:
    for j, expr in enumerate(_list(parent, key, where)):
        expr_where = f"{where}.{key}[{j}]"
        if not isinstance(expr, Mapping):
            raise ShapeError(f"{expr_where}: must be an object")
        if not all(isinstance(v, str) for v in _list(expr, "values", expr_where)):
            raise ShapeError(f"{expr_where}.values: must be strings")


def _typed(parent: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = parent.get(key)
    if value is not None and (not isinstance(value, kind)
                              or (kind is int and isinstance(value, bool))):
        got = f", got {value!r}"[:60] if isinstance(value, str | int | float) else ""
        raise ShapeError(f"{where}.{key}: must be {_KIND_NAMES[kind]}{got}")
    return value


INT32_MAX = 2**31 - 1


def _count(parent: Mapping[str, Any], key: str, where: str) -> int | None:
    """An int32 count (replicas, a group's size, restarts): the API server keeps no more,
    so a larger value is a file edited by hand, never a cluster."""
    value = _typed(parent, key, int, where)
    if value is not None and value > INT32_MAX:
        raise ShapeError(f"{where}.{key}: {value} is more than the int32 maximum "
                         f"{INT32_MAX} the API server allows")
    return value


def _mapping(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    return _typed(parent, key, Mapping, where) or {}


def _list(parent: Mapping[str, Any], key: str, where: str) -> list[Any]:
    return _typed(parent, key, list, where) or []


def _string_map(parent: Mapping[str, Any], key: str, where: str) -> None:
    value = _mapping(parent, key, where)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ShapeError(f"{where}.{key}: must map names to strings")


def _time(parent: Mapping[str, Any], key: str, where: str) -> None:
    value = _typed(parent, key, str, where)
    if value:
        try:
            parse_time_ns(value)
        except ValueError:
            raise ShapeError(f"{where}.{key}: {value!r} is not an RFC 3339 time") from None
