"""The read-only cluster view the core predicts from, and an in-memory snapshot of it.

Two implementations share this interface: `Snapshot` (a list of objects, e.g. from
a state file) and the watch-fed cache in `webhook.cluster.live`. The resource table below is the one
list of resource types poolguard reads (the cache watches them, state files hold them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..objects.kube import labels_of, name_of, namespace_of
from ..objects.podfacts import PodFacts


@dataclass(frozen=True)
class Resource:
    """A resource type poolguard reads: one row of the one resource table."""

    name: str  # the plural, as in the URL
    kind: str
    api_version: str
    namespaced: bool
    # A custom resource whose CRD may not be installed: its absence is normal (the cache
    # and `plan` read it when the API server serves it, and go on without it otherwise).
    optional: bool = False

    @property
    def group(self) -> str:
        """The API group ("" for the core group, e.g. "apps")."""
        return self.api_version.rpartition("/")[0]

    @property
    def path(self) -> str:
        """The cluster-wide collection path, e.g. /api/v1/pods."""
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        return f"{prefix}/{self.name}"


PODS = Resource("pods", "Pod", "v1", True)
NODES = Resource("nodes", "Node", "v1", False)
NAMESPACES = Resource("namespaces", "Namespace", "v1", False)
REPLICASETS = Resource("replicasets", "ReplicaSet", "apps/v1", True)
DEPLOYMENTS = Resource("deployments", "Deployment", "apps/v1", True)
STATEFULSETS = Resource("statefulsets", "StatefulSet", "apps/v1", True)
# sigs.k8s.io/lws: one replica is a group of pods (a leader and its workers).
LEADERWORKERSETS = Resource("leaderworkersets", "LeaderWorkerSet",
                            "leaderworkerset.x-k8s.io/v1", True, optional=True)
# github.com/argoproj/argo-rollouts: a Deployment-like workload that sizes its ReplicaSets.
ROLLOUTS = Resource("rollouts", "Rollout", "argoproj.io/v1alpha1", True, optional=True)
RESOURCES = (PODS, NODES, NAMESPACES, REPLICASETS, DEPLOYMENTS, STATEFULSETS,
             LEADERWORKERSETS, ROLLOUTS)
# The workloads whose scale-downs poolguard predicts: the apps/v1 kinds, whose templates
# the API server validates, and the two custom resources with a /scale subresource.
APPS_WORKLOADS = (DEPLOYMENTS, REPLICASETS, STATEFULSETS)
WORKLOADS = (*APPS_WORKLOADS, LEADERWORKERSETS, ROLLOUTS)
# By (API group, resource): another group's "rollouts" is not an Argo Rollout.
WORKLOAD_RESOURCES = {(r.group, r.name): r.kind for r in WORKLOADS}
APPS_WORKLOAD_RESOURCES = {(r.group, r.name): r.kind for r in APPS_WORKLOADS}
WORKLOAD_KINDS = tuple(WORKLOAD_RESOURCES.values())
RESOURCE_OF_KIND = {r.kind: r.name for r in WORKLOADS}
_WORKLOAD_OF_KIND = {r.kind: r for r in WORKLOADS}
KIND_ALIASES = {
    "deployment": "Deployment", "deployments": "Deployment", "deploy": "Deployment",
    "replicaset": "ReplicaSet", "replicasets": "ReplicaSet", "rs": "ReplicaSet",
    "statefulset": "StatefulSet", "statefulsets": "StatefulSet", "sts": "StatefulSet",
    "leaderworkerset": "LeaderWorkerSet", "leaderworkersets": "LeaderWorkerSet",
    "lws": "LeaderWorkerSet",
    "rollout": "Rollout", "rollouts": "Rollout", "ro": "Rollout",
}
# The accepted spellings, for messages and --help: long names, then the short ones.
KIND_NAMES = "deployment, replicaset, statefulset, leaderworkerset or rollout"
KIND_SHORT_NAMES = "deploy, rs, sts, lws, ro"


def is_workload_object(obj: Mapping[str, Any]) -> bool:
    """Whether `obj` is one of the workloads poolguard reads, by kind and, for the custom
    resources, API group: another group's `Rollout` is not an Argo Rollout. (The apps/v1
    kinds are taken by kind alone, whatever apiVersion a state file gives them.)"""
    resource = _WORKLOAD_OF_KIND.get(obj.get("kind") or "")
    if resource is None:
        return False
    api_version = obj.get("apiVersion")
    return (not resource.optional or not isinstance(api_version, str)
            or api_version.rpartition("/")[0] == resource.group)


def canonical_kind(kind: str) -> str | None:
    """The workload kind (e.g. `Deployment`, `LeaderWorkerSet`) for any accepted
    spelling, else None."""
    return KIND_ALIASES.get(kind.lower())


def workload_kind(group: str | None, resource: str | None,
                  kinds: Mapping[tuple[str, str], str] = WORKLOAD_RESOURCES) -> str | None:
    """The workload kind an admission request's `resource` (group and plural) names.

    The API server always sends the group; a request without one is read as the apps/v1
    resource of that name, as it always was (never as a custom resource).
    """
    if not isinstance(resource, str):
        return None
    if group is None:
        group = "apps"
    return kinds.get((group, resource))


class ClusterView(Protocol):
    """What the core reads. Implementations must not block on the network."""

    def pods(self, namespace: str) -> Sequence[Mapping[str, Any]]: ...

    def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def replicasets(self, namespace: str) -> Sequence[Mapping[str, Any]]: ...

    def node(self, name: str) -> Mapping[str, Any] | None: ...

    def namespace_labels(self, name: str) -> Mapping[str, str]: ...

    def workload(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


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
            return found, all(map(_plain_selector, selectors))
    return pod_facts(view, namespace), False


def _plain_selector(selector: Mapping[str, Any] | None) -> bool:
    """matchLabels of strings and nothing else, or a selector that selects nothing."""
    if _selects_nothing(selector):
        return True
    assert selector is not None
    labels = selector.get("matchLabels")
    return (not selector.get("matchExpressions") and isinstance(labels, Mapping)
            and all(isinstance(value, str) for value in labels.values()))


class LabelIndex:
    """One namespace's pods by label (key, value), each list in namespace order.

    The index by owner a scale check needs: a ReplicaSet's selector carries its
    `pod-template-hash`, so that label's entry holds the ReplicaSet's pods (and only
    pods that carry it), and a Deployment's are the union over its ReplicaSets. Pods
    are numbered as they join the namespace; the number orders a union as the
    namespace lists them, so results do not depend on which index answered.
    """

    def __init__(self) -> None:
        self.postings: dict[tuple[str, Any], dict[int, PodFacts]] = {}
        self.numbers: dict[str, int] = {}  # pod name -> its number (live caches)
        self._next = 0
        # Answers by selectors, until the index changes: a state file's never does.
        self._answers: dict[Any, list[PodFacts] | None] = {}

    def add(self, facts: PodFacts, number: int | None = None) -> int:
        """Index `facts` under each of its labels; returns the pod's number."""
        if number is None:
            number = self._next
        self._next = max(self._next, number + 1)
        self._answers.clear()
        labels = facts.labels
        if isinstance(labels, Mapping):
            postings = self.postings
            for pair in labels.items():
                try:
                    entry = postings.get(pair)
                except TypeError:  # an unhashable value: no selector can ask for it
                    continue
                if entry is None:
                    entry = postings[pair] = {}
                entry[number] = facts
        return number

    def remove(self, facts: PodFacts, number: int) -> None:
        """Drop `facts` (indexed under `number`) from the entries of its labels."""
        self._answers.clear()
        labels = facts.labels
        if isinstance(labels, Mapping):
            for pair in labels.items():
                try:
                    entry = self.postings.get(pair)
                except TypeError:
                    continue
                if entry is not None:
                    entry.pop(number, None)
                    if not entry:
                        del self.postings[pair]

    def put(self, name: str, facts: PodFacts, before: PodFacts | None) -> None:
        """A live cache's add or update of pod `name` (`before`: what it replaces)."""
        number = self.numbers.get(name)
        if number is not None and before is not None:
            self.remove(before, number)
        self.numbers[name] = self.add(facts, number)

    def drop(self, name: str, before: PodFacts) -> None:
        """A live cache's delete of pod `name`."""
        number = self.numbers.pop(name, None)
        if number is not None:
            self.remove(before, number)

    def selected(self, selectors: list[Mapping[str, Any] | None]) -> list[PodFacts] | None:
        """Pods that may match one of `selectors` (see candidate_pod_facts), or None
        when a selector has no matchLabels to look up (the caller scans instead).

        A selector of matchLabels only is answered exactly (the pods under every one of
        its labels); one with expressions too by the pods under its rarest label. The
        list returned is shared: read it, do not change it.
        """
        try:
            question: Any = tuple(_question(selector) for selector in selectors)
        except TypeError:  # an unhashable value: leave it to the scan
            return None
        answer = self._answers.get(question, self)
        if answer is self:
            answer = self._answers[question] = self._select(selectors)
        return answer  # type: ignore[return-value]

    def _select(self, selectors: list[Mapping[str, Any] | None]) -> list[PodFacts] | None:
        found: dict[int, PodFacts] = {}
        for selector in selectors:
            labels = selector.get("matchLabels") if isinstance(selector, Mapping) else None
            if not labels or not isinstance(labels, Mapping):
                if not _selects_nothing(selector):
                    return None
                continue
            entries = sorted((self.postings.get(pair) or {} for pair in labels.items()), key=len)
            rarest = entries[0]
            if len(entries) == 1 or selector.get("matchExpressions"):  # type: ignore[union-attr]
                found.update(rarest)
                continue
            numbers = rarest.keys() & entries[1].keys()
            for entry in entries[2:]:
                numbers &= entry.keys()
            ordered = sorted(numbers)
            found.update(zip(ordered, map(rarest.__getitem__, ordered), strict=True))
        return list(map(found.__getitem__, sorted(found)))


def _question(selector: Any) -> Any:
    """A selector as a hashable key for the answers kept (TypeError when it cannot be)."""
    if not isinstance(selector, Mapping):
        return ("not a mapping", repr(selector))
    labels = selector.get("matchLabels")
    expressions = selector.get("matchExpressions")
    return (tuple(labels.items()) if isinstance(labels, Mapping) else repr(labels),
            repr(expressions))


def _selects_nothing(selector: Any) -> bool:
    """A workload selector without matchLabels or matchExpressions matches no pod."""
    return not selector or (isinstance(selector, Mapping) and not selector.get("matchLabels")
                            and not selector.get("matchExpressions"))


class Snapshot(IndexedClusterView):
    """A ClusterView over a fixed set of objects."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self._pods: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        self._facts: dict[str, list[PodFacts]] = {}
        self._labels: dict[str, LabelIndex] = {}
        self._pod_index: dict[tuple[str, str], Mapping[str, Any]] = {}
        self._replicasets: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        self._nodes: dict[str, Mapping[str, Any]] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._workloads: dict[tuple[str, str, str], Mapping[str, Any]] = {}
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
        elif kind == "Node":
            self._nodes[name_of(obj)] = obj
        elif kind == "Namespace":
            self._namespaces[name_of(obj)] = labels_of(obj)
        if kind == "ReplicaSet":
            self._replicasets[namespace_of(obj)].append(obj)
        if kind in WORKLOAD_KINDS and is_workload_object(obj):
            self._workloads[(kind, namespace_of(obj), name_of(obj))] = obj

    def pods(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        return self._pods.get(namespace, [])

    def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._pod_index.get((namespace, name))

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

    def replicasets(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        return self._replicasets.get(namespace, [])

    def node(self, name: str) -> Mapping[str, Any] | None:
        return self._nodes.get(name)

    def nodes(self) -> list[Mapping[str, Any]]:
        return list(self._nodes.values())

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        # A namespace missing from the snapshot has no labels (DESIGN 3).
        return self._namespaces.get(name, {})

    def workload(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._workloads.get((kind, namespace, name))

    def workloads(self) -> list[Mapping[str, Any]]:
        return list(self._workloads.values())
