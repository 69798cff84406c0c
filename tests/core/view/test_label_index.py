"""The label index views keep: a scale check reads its workload's pods, with unchanged results.

A ReplicaSet's selector carries its pod-template-hash, so the index entry for that label
holds the ReplicaSet's pods; a Deployment's are the union over its ReplicaSets. The
prediction must come out the same as when every pod of the namespace is scanned,
including pods the selector matches that another controller owns (they count in rule 5)
and orphans the controller would adopt.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import factories as f
from webhook.core.scale.predict import predict_scale
from webhook.core.view.cluster import IndexedClusterView, candidate_pod_facts
from webhook.core.view.snapshot import Snapshot

NOW = 1_800_000_000 * 10**9


class ScanningView:
    """The same objects behind the bare ClusterView protocol: no facts kept, no index."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self._snapshot = Snapshot(objects)

    def pods(self, namespace: str) -> Any:
        return self._snapshot.pods(namespace)

    def pod(self, namespace: str, name: str) -> Any:
        return self._snapshot.pod(namespace, name)

    def objects_of(self, kind: str, namespace: str) -> Any:
        return self._snapshot.objects_of(kind, namespace)

    def node(self, name: str) -> Any:
        return self._snapshot.node(name)

    def namespace_labels(self, name: str) -> Any:
        return self._snapshot.namespace_labels(name)

    def workload(self, kind: str, namespace: str, name: str) -> Any:
        return self._snapshot.workload(kind, namespace, name)


def two_deployments() -> list[dict[str, Any]]:
    web, api = f.deployment("web", replicas=4), f.deployment("api", replicas=2)
    web_old = f.replicaset("web-1", owner=web, pod_hash="1", replicas=2)
    web_new = f.replicaset("web-2", owner=web, pod_hash="2", replicas=2)
    api_rs = f.replicaset("api-1", owner=api, pod_hash="9", replicas=2)
    pods = [f.pod("api-1-a", owner=api_rs), f.pod("web-2-a", owner=web_new),
            f.pod("web-1-a", owner=web_old), f.pod("api-1-b", owner=api_rs),
            f.pod("web-1-b", owner=web_old), f.pod("web-2-b", owner=web_new)]
    return [web, api, web_old, web_new, api_rs, *pods]


def test_a_replicasets_candidates_are_its_own_pods_in_namespace_order() -> None:
    objects = two_deployments()
    view = Snapshot(objects)
    web_old, web_new = objects[2], objects[3]
    one, exact = candidate_pod_facts(view, "ml", [web_old["spec"]["selector"]])
    assert [p.name for p in one] == ["web-1-a", "web-1-b"] and exact
    both, exact = candidate_pod_facts(view, "ml", [web_new["spec"]["selector"],
                                                   web_old["spec"]["selector"]])
    assert [p.name for p in both] == ["web-2-a", "web-1-a", "web-1-b", "web-2-b"] and exact


def test_selectors_without_match_labels_fall_back_to_the_namespace() -> None:
    view = Snapshot(two_deployments())
    by_expression = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}
    pods, exact = candidate_pod_facts(view, "ml", [by_expression])
    assert len(pods) == 6 and not exact  # the caller still applies the selector
    mixed = {"matchLabels": {"pod-template-hash": "1"}, **by_expression}
    pods, exact = candidate_pod_facts(view, "ml", [mixed])
    assert [p.name for p in pods] == ["web-1-a", "web-1-b"] and not exact
    assert candidate_pod_facts(view, "ml", [{}]) == ([], True)  # an empty one selects nothing


def test_a_view_without_the_label_index_is_scanned() -> None:
    """The index is optional (IndexedClusterView): a bare ClusterView gives its namespace."""
    objects = two_deployments()
    assert isinstance(Snapshot(objects), IndexedClusterView)
    bare = ScanningView(objects)
    assert not isinstance(bare, IndexedClusterView)
    pods, exact = candidate_pod_facts(bare, "ml", [objects[2]["spec"]["selector"]])
    assert len(pods) == 6 and not exact  # every pod of ml: the caller applies the selector


@st.composite
def namespaces(draw: Any) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    web, other = f.deployment("web", replicas=6), f.deployment("other", replicas=2)
    sets = [f.replicaset(f"web-{h}", owner=web, pod_hash=h, replicas=3) for h in "12"]
    foreign = f.replicaset("other-1", owner=other, pod_hash="1", app="web")  # same labels
    owners = [*sets, foreign, None]
    pods = []
    for index in range(draw(st.integers(0, 14))):
        owner = draw(st.sampled_from(owners))
        labels = draw(st.sampled_from([None, {"app": "web"}, {"app": "web",
                                                              "pod-template-hash": "2"}]))
        pod = f.pod(f"p{index}", owner=owner, labels=labels,
                    node_name=draw(st.sampled_from(["n1", "n2", "n3"])),
                    cost=draw(st.sampled_from([None, "5", "-5"])),
                    ready=draw(st.booleans()))
        if owner is None and labels is None:
            pod["metadata"]["labels"] = {"app": "web"}  # an orphan the selector matches
        pods.append(pod)
    workload = draw(st.sampled_from([web, sets[0], sets[1]]))
    objects = [web, other, *sets, foreign, *pods]
    return objects, workload, draw(st.integers(0, 6))


def outcome(prediction: Any) -> tuple:
    return ([p.name for p in prediction.victims], [p.name for p in prediction.survivors],
            [[p.name for p in g.members] for g in prediction.tie_groups],
            [p.rank for p in prediction.victims + prediction.survivors], prediction.notes)


@settings(max_examples=150, deadline=None)
@given(namespaces())
def test_indexed_prediction_equals_the_namespace_scan(case: tuple) -> None:
    objects, workload, replicas = case
    indexed = predict_scale(Snapshot(objects), workload, replicas, NOW)
    scanned = predict_scale(ScanningView(objects), workload, replicas, NOW)
    assert outcome(indexed) == outcome(scanned)
