"""A ClusterView over a fixed set of objects: a state file, a test's objects."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..objects.kube import labels_of, name_of, namespace_of
from ..objects.podfacts import PodFacts
from .cluster import IndexedClusterView
from .label_index import LabelIndex
from .pods_by_node import PodsByNode, T
from .resource import workload_resource_of


class Snapshot(IndexedClusterView):
    """A ClusterView over a fixed set of objects."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self._pods: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        self._facts: dict[str, list[PodFacts]] = {}
        self._labels: dict[str, LabelIndex] = {}
        self._pod_index: dict[tuple[str, str], Mapping[str, Any]] = {}
        # (kind, namespace) -> the workload objects there, in the order added
        self._objects: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
        self._nodes: dict[str, Mapping[str, Any]] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._workloads: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        self._by_node: PodsByNode | None = None
        self.counts: dict[str, int] = defaultdict(int)
        for obj in objects:
            self.add(obj)

    def add(self, obj: Mapping[str, Any]) -> None:
        """Index one object by its kind; kinds the core does not read are counted only."""
        kind = obj.get("kind") or ""
        self.counts[kind] += 1
        if kind == "Pod":
            self._pods[namespace_of(obj)].append(obj)
            self._facts.pop(namespace_of(obj), None)
            self._labels.pop(namespace_of(obj), None)
            self._pod_index[(namespace_of(obj), name_of(obj))] = obj
            self._by_node = None
        elif kind == "Node":
            self._nodes[name_of(obj)] = obj
        elif kind == "Namespace":
            self._namespaces[name_of(obj)] = labels_of(obj)
        if workload_resource_of(obj) is not None:
            self._objects[(kind, namespace_of(obj))].append(obj)
            self._workloads[(kind, namespace_of(obj), name_of(obj))] = obj

    def pods(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        return self._pods.get(namespace, [])

    def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._pod_index.get((namespace, name))

    def pods_on_node(self, name: str) -> list[Mapping[str, Any]]:
        """The pods bound to node `name` (indexed on first use)."""
        return self._pods_by_node().on(name)

    def read_node(self, name: str, key: object,
                  compute: Callable[[list[Mapping[str, Any]]], T]) -> T:
        """`compute(pods on node)`, remembered per node and `key` (`PodsByNode.remembered`)."""
        return self._pods_by_node().remembered(name, key, compute)

    def _pods_by_node(self) -> PodsByNode:
        if self._by_node is None:
            self._by_node = PodsByNode(self._pod_index.values())
        return self._by_node

    def read_all_facts(self) -> None:
        """Read the facts of every pod now (a server does this once, after loading)."""
        for namespace in list(self._pods):
            self.pod_facts(namespace)

    def pod_facts(self, namespace: str) -> Sequence[PodFacts]:
        """The facts of the namespace's pods, read once (on first use) and kept."""
        facts = self._facts.get(namespace)
        if facts is None:
            facts = self._facts[namespace] = [PodFacts(p) for p in self.pods(namespace)]
        return facts

    def pod_facts_selected(self, namespace: str,
                           selectors: list[Mapping[str, Any] | None]) -> list[PodFacts] | None:
        """Pods that may match one of the workload `selectors`, from the label index."""
        index = self._labels.get(namespace)
        if index is None:
            index = self._labels[namespace] = LabelIndex()
            for facts in self.pod_facts(namespace):
                index.add(facts)
        return index.selected(selectors)

    def all_pods(self) -> list[Mapping[str, Any]]:
        return [pod for pods in self._pods.values() for pod in pods]

    def objects_of(self, kind: str, namespace: str) -> Sequence[Mapping[str, Any]]:
        return self._objects.get((kind, namespace), [])

    def node(self, name: str) -> Mapping[str, Any] | None:
        return self._nodes.get(name)

    def nodes(self) -> list[Mapping[str, Any]]:
        return list(self._nodes.values())

    def has_namespace(self, name: str) -> bool:
        """Whether the snapshot holds Namespace `name` (a state file may leave it out)."""
        return name in self._namespaces

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        # A namespace missing from the snapshot has no labels (DESIGN 3).
        return self._namespaces.get(name, {})

    def workload(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._workloads.get((kind, namespace, name))

    def workloads(self) -> list[Mapping[str, Any]]:
        return list(self._workloads.values())
