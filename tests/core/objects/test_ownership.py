"""Controller references and claims (metav1.GetControllerOf, controller_ref_manager.go)."""

from __future__ import annotations

from tests.support import factories as f
from webhook.core.objects.ownership import (
    controller_of,
    is_controlled_by,
    owned_objects,
    owned_pod_facts,
    points_at,
)
from webhook.core.objects.podfacts import PodFacts


def test_a_reference_matches_by_uid_when_both_sides_have_one():
    assert points_at(("u1", "ReplicaSet", "web"), ("u1", "ReplicaSet", "other"))
    assert not points_at(("u1", "ReplicaSet", "web"), ("u2", "ReplicaSet", "web"))


def test_a_reference_without_a_uid_matches_by_kind_and_name():
    assert points_at(("", "ReplicaSet", "web"), ("u1", "ReplicaSet", "web"))
    assert not points_at(("", "StatefulSet", "web"), ("u1", "ReplicaSet", "web"))
    assert not points_at(None, ("u1", "ReplicaSet", "web"))


def test_only_the_controller_reference_counts():
    rs = f.replicaset("web")
    pod = f.pod("web-1", owner=rs)
    refs = pod["metadata"]["ownerReferences"]
    refs.insert(0, {**refs[0], "uid": "someone-else", "controller": False})
    assert controller_of(pod) == (rs["metadata"]["uid"], "ReplicaSet", "web")
    assert is_controlled_by(pod, rs)
    assert PodFacts(pod).controller == controller_of(pod)


def test_a_claim_takes_own_pods_and_orphans_but_not_leaving_orphans_or_others():
    rs = f.replicaset("web")
    other = f.replicaset("other")
    own = f.pod("own", owner=rs)
    orphan = f.pod("orphan", labels=rs["spec"]["selector"]["matchLabels"])
    leaving = f.pod("leaving", labels=rs["spec"]["selector"]["matchLabels"])
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    foreign = f.pod("foreign", owner=other, labels=rs["spec"]["selector"]["matchLabels"])
    pods = [own, orphan, leaving, foreign]
    assert [p["metadata"]["name"] for p in owned_objects(pods, rs)] == ["own", "orphan"]
    assert [p.name for p in owned_pod_facts([PodFacts(p) for p in pods], rs)] == [
        "own", "orphan"]
