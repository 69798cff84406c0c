"""The read-only cluster view: the one protocol the core, the reconciler and `plan` read.

Two implementations share this interface: `Snapshot` (snapshot.py: a list of objects, e.g.
from a state file) and the watch-fed cache in `webhook.cluster.live`. Which resources
poolguard reads is the kind registry's (webhook/core/kinds), built on resource.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..objects.podfacts import PodFacts
from .label_index import plain_selector
from .pods_by_node import T


class ClusterView(Protocol):
    """What poolguard reads of the cluster. Implementations must not block on the network."""

    # Pods.
    def pods(self, namespace: str) -> Sequence[Mapping[str, Any]]: ...

    def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def all_pods(self) -> list[Mapping[str, Any]]:
        """Every pod, in all namespaces."""
        ...

    # Nodes.
    def node(self, name: str) -> Mapping[str, Any] | None: ...

    def nodes(self) -> list[Mapping[str, Any]]: ...

    def pods_on_node(self, name: str) -> list[Mapping[str, Any]]:
        """The pods bound to node `name`."""
        ...

    def read_node(self, name: str, key: object,
                  compute: Callable[[list[Mapping[str, Any]]], T]) -> T:
        """`compute(pods on node)`, remembered per node and `key` until a pod there
        changes: a node's load is read once, not once per pod."""
        ...

    # Namespaces.
    def namespace_labels(self, name: str) -> Mapping[str, str]: ...

    # Workloads, and the objects their controllers own (a Deployment's ReplicaSets).
    def workload(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def objects_of(self, kind: str, namespace: str) -> Sequence[Mapping[str, Any]]:
        """The namespace's objects of workload kind `kind` (`ReplicaSet`: every
        Deployment's and Rollout's, whatever the workloads read), in the view's order."""
        ...

    def workloads(self) -> list[Mapping[str, Any]]:
        """Every workload object, of every kind."""
        ...


@runtime_checkable
class IndexedClusterView(ClusterView, Protocol):
    """A ClusterView that also keeps its pods' facts and a label index (optional).

    The label index is the owner index of a scale check: a ReplicaSet's selector
    carries its `pod-template-hash`, so the pods under that label are the ReplicaSet's
    (see LabelIndex). Both views poolguard ships declare it (Snapshot here, LiveCluster
    in webhook.cluster.live); the core reads any ClusterView, and reads one of these
    through `pod_facts` and `candidate_pod_facts` without scanning a namespace.
    """

    def pod_facts(self, namespace: str) -> Sequence[PodFacts]:
        """The facts of the namespace's pods, each read once and kept."""
        ...

    def pod_facts_selected(self, namespace: str,
                           selectors: list[Mapping[str, Any] | None]) -> list[PodFacts] | None:
        """Pods that may match one of the workload `selectors` (every pod that matches
        is among them), in namespace order, from the label index; None when a selector
        has no matchLabels to look up (the caller scans the namespace instead)."""
        ...


def pod_facts(view: ClusterView, namespace: str) -> Sequence[PodFacts]:
    """The facts of the pods in `namespace`: kept by views that have them, else read now."""
    if isinstance(view, IndexedClusterView):
        return view.pod_facts(namespace)
    return [PodFacts(pod) for pod in view.pods(namespace)]


def candidate_pod_facts(view: ClusterView, namespace: str,
                        selectors: Sequence[Mapping[str, Any] | None]
                        ) -> tuple[Sequence[PodFacts], bool]:
    """Pods of `namespace` that may match one of the workload `selectors`, in namespace
    order, and whether they are exactly the pods that match.

    Every pod that matches is among them. An IndexedClusterView answers from its label
    index, so a scale check reads its workload's pods only, not the namespace's, and
    exactly for selectors of matchLabels alone (what controllers write); other views
    give the whole namespace.
    """
    if isinstance(view, IndexedClusterView):
        found = view.pod_facts_selected(namespace, list(selectors))
        if found is not None:
            return found, all(map(plain_selector, selectors))
    return pod_facts(view, namespace), False
