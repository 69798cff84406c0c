"""An index of pods by the node they are bound to: what the node ranks read per event."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from ..objects.kube import name_of, namespace_of, spec_of

PodRef = tuple[str, str]  # (namespace, name)
T = TypeVar("T")


class PodsByNode:
    """Pods (plain dicts) by `spec.nodeName`; unscheduled pods are not indexed.

    Not thread-safe on its own: the live cache updates it under its lock."""

    def __init__(self, pods: Iterable[Mapping[str, Any]] = ()) -> None:
        self._nodes: dict[str, dict[PodRef, Mapping[str, Any]]] = {}
        self._node_of: dict[PodRef, str] = {}
        # node -> (key, value): what was read from the node's pods, until they change
        self._memo: dict[str, tuple[object, Any]] = {}
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
            self._memo.pop(node, None)

    def drop(self, ref: PodRef) -> None:
        """Forget the pod `ref` (deleted)."""
        node = self._node_of.pop(ref, None)
        if node is not None:
            self._memo.pop(node, None)
            pods = self._nodes[node]
            pods.pop(ref, None)
            if not pods:
                del self._nodes[node]

    def on(self, node: str) -> list[Mapping[str, Any]]:
        """The pods bound to `node`."""
        return list(self._nodes.get(node, {}).values())

    def remembered(self, node: str, key: object,
                   compute: Callable[[list[Mapping[str, Any]]], T]) -> T:
        """`compute(pods on node)`, remembered until a pod there changes or `key` does
        (a node's occupancy is read once per change, not once per pod on it)."""
        memo = self._memo.get(node)
        if memo is not None and memo[0] == key:
            return memo[1]
        value = compute(self.on(node))
        self._memo[node] = (key, value)
        return value

    def node_names(self) -> list[str]:
        """Every node that has pods."""
        return list(self._nodes)
