"""An index of pods by the node they are bound to: what the node ranks read per event."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .kube import name_of, namespace_of, spec_of

PodRef = tuple[str, str]  # (namespace, name)


class PodsByNode:
    """Pods (plain dicts) by `spec.nodeName`; unscheduled pods are not indexed.

    Not thread-safe on its own: the live cache updates it under its lock."""

    def __init__(self, pods: Iterable[Mapping[str, Any]] = ()) -> None:
        self._nodes: dict[str, dict[PodRef, Mapping[str, Any]]] = {}
        self._node_of: dict[PodRef, str] = {}
        for pod in pods:
            self.put(pod)

    def put(self, pod: Mapping[str, Any]) -> None:
        """Index `pod` as it is now (a pod is bound once, but a relist may move it)."""
        ref = (namespace_of(pod), name_of(pod))
        self.drop(ref)
        node = spec_of(pod).get("nodeName")
        if isinstance(node, str) and node:
            self._nodes.setdefault(node, {})[ref] = pod
            self._node_of[ref] = node

    def drop(self, ref: PodRef) -> None:
        """Forget the pod `ref` (deleted)."""
        node = self._node_of.pop(ref, None)
        if node is not None:
            pods = self._nodes[node]
            pods.pop(ref, None)
            if not pods:
                del self._nodes[node]

    def on(self, node: str) -> list[Mapping[str, Any]]:
        """The pods bound to `node`."""
        return list(self._nodes.get(node, {}).values())

    def node_names(self) -> list[str]:
        """Every node that has pods."""
        return list(self._nodes)
