"""The Deployment controller's scale(): how a change splits between its ReplicaSets.

Upstream sources (kubernetes/kubernetes):
- pkg/controller/deployment/sync_test.go, TestScale (recent version: ktesting, ptr).
  Its harness annotates every ReplicaSet with SetReplicasAnnotations(rs,
  desired=old.spec.replicas, max=desired+MaxSurge(old)) and newDeployment() defaults
  maxSurge and maxUnavailable to 0.
- pkg/controller/deployment/sync.go (scale) and util/deployment_util.go (IsSaturated,
  FindActiveOrLatest).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import factories as f
from webhook.core.deployment.deployment_sync import replicaset_targets
from webhook.core.deployment.deployment_util import (
    DESIRED_REPLICAS_ANNOTATION,
    max_surge,
)
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.predict import predict_scale
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.view.snapshot import Snapshot

NEW_TS = "2016-05-20T02:00:00Z"  # newTimestamp
OLD_TS = "2016-05-20T01:00:00Z"  # oldTimestamp
OLDER_TS = "2016-05-20T00:00:00Z"  # olderTimestamp
NEW_IMAGE = "foo/bar"
OLD_IMAGE = "foo/bar:old"


# --- TestScale --------------------------------------------------------------------------


def scale_deployment(replicas: int, max_surge_value: Any = 0, max_unavailable: Any = 0,
                     image: str = NEW_IMAGE) -> dict[str, Any]:
    """newDeployment("foo", replicas, nil, maxSurge, maxUnavailable, ...)."""
    return f.deployment("foo", "default", replicas, image=image, max_surge=max_surge_value,
                        max_unavailable=max_unavailable)


# (name, deployment (replicas, surge), old deployment (replicas, surge),
#  new RS (name, size, ts) or None, old RSs [(name, size, ts)], expected sizes,
#  desiredReplicasAnnotations, extra: dict)
SCALE_CASES: list[tuple[Any, ...]] = [
    ("normal scaling event: 10 -> 12", (12, 0), (10, 0), ("foo-v1", 10, NEW_TS), [],
     {"foo-v1": 12}, {}, {}),
    ("normal scaling event: 10 -> 5", (5, 0), (10, 0), ("foo-v1", 10, NEW_TS), [],
     {"foo-v1": 5}, {}, {}),
    ("proportional scaling: 5 -> 10", (10, 0), (5, 0), ("foo-v2", 2, NEW_TS),
     [("foo-v1", 3, OLD_TS)], {"foo-v2": 4, "foo-v1": 6}, {}, {}),
    ("proportional scaling: 5 -> 3", (3, 0), (5, 0), ("foo-v2", 2, NEW_TS),
     [("foo-v1", 3, OLD_TS)], {"foo-v2": 1, "foo-v1": 2}, {}, {}),
    ("proportional scaling: 9 -> 4", (4, 0), (9, 0), ("foo-v2", 8, NEW_TS),
     [("foo-v1", 1, OLD_TS)], {"foo-v2": 4, "foo-v1": 0}, {}, {}),
    ("proportional scaling: 7 -> 10", (10, 0), (7, 0), ("foo-v3", 2, NEW_TS),
     [("foo-v2", 3, OLD_TS), ("foo-v1", 2, OLDER_TS)],
     {"foo-v3": 3, "foo-v2": 4, "foo-v1": 3}, {}, {}),
    ("proportional scaling: 13 -> 8", (8, 0), (13, 0), ("foo-v3", 2, NEW_TS),
     [("foo-v2", 8, OLD_TS), ("foo-v1", 3, OLDER_TS)],
     {"foo-v3": 1, "foo-v2": 5, "foo-v1": 2}, {}, {}),
    ("leftover distribution: 3 -> 4", (4, 0), (3, 0), ("foo-v3", 1, NEW_TS),
     [("foo-v2", 1, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     {"foo-v3": 2, "foo-v2": 1, "foo-v1": 1}, {}, {}),
    ("leftover distribution: 3 -> 2", (2, 0), (3, 0), ("foo-v3", 1, NEW_TS),
     [("foo-v2", 1, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     {"foo-v3": 1, "foo-v2": 1, "foo-v1": 0}, {}, {}),
    ("proportional scaling (no new rs): 4 -> 5", (5, 0), (4, 0), None,
     [("foo-v2", 2, OLD_TS), ("foo-v1", 2, OLDER_TS)], {"foo-v2": 3, "foo-v1": 2}, {}, {}),
    ("proportional scaling: 6 -> 0", (0, 0), (6, 0), ("foo-v3", 3, NEW_TS),
     [("foo-v2", 2, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     {"foo-v3": 0, "foo-v2": 0, "foo-v1": 0}, {}, {}),
    ("proportional scaling: 0 -> 6", (6, 0), (6, 0), ("foo-v3", 0, NEW_TS),
     [("foo-v2", 0, OLD_TS), ("foo-v1", 0, OLDER_TS)],
     {"foo-v3": 6, "foo-v2": 0, "foo-v1": 0}, {}, {}),
    ("failed rs update", (5, 0), (5, 0), ("foo-v3", 2, NEW_TS),
     [("foo-v2", 1, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     # Upstream drops the foo-v2 update (the fake client fails it) and expects 2 for
     # foo-v2 only because its replicas were bumped before the failure; the targets
     # computed by scale() are these.
     {"foo-v3": 2, "foo-v2": 2, "foo-v1": 1}, {"foo-v2": 3}, {}),
    ("deployment with surge pods", (20, 2), (10, 2), ("foo-v2", 6, NEW_TS),
     [("foo-v1", 6, OLD_TS)], {"foo-v2": 11, "foo-v1": 11}, {}, {}),
    ("change both surge and size", (50, 6), (10, 3), ("foo-v2", 5, NEW_TS),
     [("foo-v1", 8, OLD_TS)], {"foo-v2": 22, "foo-v1": 34}, {}, {}),
    ("change both size and template", (14, 0), (10, 0), None,
     [("foo-v2", 7, NEW_TS), ("foo-v1", 3, OLD_TS)], {"foo-v2": 10, "foo-v1": 4}, {},
     {"template_changed": True}),
    ("saturated but broken new replica set does not affect old pods", (2, 1, 1), (2, 1, 1),
     ("foo-v2", 2, NEW_TS), [("foo-v1", 1, OLD_TS)], {"foo-v2": 2, "foo-v1": 1}, {},
     {"new_available": 0}),
]


@pytest.mark.parametrize("case", SCALE_CASES, ids=[c[0] for c in SCALE_CASES])
def test_scale(case):
    _, new_d, old_d, new_rs, old_rss, expected, desired_annotations, extra = case
    deployment = scale_deployment(*new_d)
    old_deployment = scale_deployment(*old_d)
    if extra.get("template_changed"):
        # updatedTemplate(): the Deployment's template differs from every ReplicaSet's.
        deployment["spec"]["template"]["metadata"]["labels"]["another"] = "label"
    replicasets = []
    specs = ([(*new_rs, NEW_IMAGE)] if new_rs else []) + [(*o, OLD_IMAGE) for o in old_rss]
    for name, size, created, image in specs:
        rs = f.replicaset(name, "default", size, owner=deployment, created=created,
                          image=image, pod_hash=name)
        desired = desired_annotations.get(name, old_deployment["spec"]["replicas"])
        f.annotate_rollout(rs, desired, desired + max_surge(old_deployment))
        replicasets.append(rs)
    if "new_available" in extra:
        replicasets[0]["status"]["availableReplicas"] = extra["new_available"]
    # scale() reads the new spec.replicas and the old status.replicas.
    deployment["status"]["replicas"] = old_deployment["spec"]["replicas"]
    deployment["spec"]["replicas"] = old_deployment["spec"]["replicas"]
    targets = replicaset_targets(deployment, replicasets, new_d[0])
    sizes = {rs["metadata"]["name"]: targets.get(rs["metadata"]["name"], rs["spec"]["replicas"])
             for rs in replicasets}
    assert sizes == expected


def test_saturated_new_replicaset_scales_old_ones_to_zero():
    # IsSaturated (TestAnnotationUtils): replicas, desired annotation and available
    # replicas all equal the Deployment's; then scale() drains every active old RS.
    deployment = scale_deployment(3, 1, 0)
    new = f.replicaset("foo-new", "default", 3, owner=deployment, created=NEW_TS,
                       image=NEW_IMAGE, pod_hash="new")
    old = f.replicaset("foo-old", "default", 2, owner=deployment, created=OLD_TS,
                       image=OLD_IMAGE, pod_hash="old")
    f.annotate_rollout(new, 3, 4)
    f.annotate_rollout(old, 3, 4)
    assert replicaset_targets(deployment, [new, old], 3) == {"foo-old": 0}
    # Not saturated: proportional scaling instead. allowed 3+1, total 5, toAdd -1; both
    # fractions round to 0, so the leftover -1 lands on the largest RS (foo-new).
    new["status"]["availableReplicas"] = 2
    assert replicaset_targets(deployment, [new, old], 3) == {"foo-new": 2, "foo-old": 2}
    new["status"]["availableReplicas"] = 3
    new["metadata"]["annotations"][DESIRED_REPLICAS_ANNOTATION] = "+3"  # ParseUint rejects
    assert replicaset_targets(deployment, [new, old], 3) == {"foo-new": 2, "foo-old": 2}


def test_recreate_rollout_is_not_scaled_proportionally():
    deployment = f.deployment("foo", "default", 4, strategy="Recreate")
    new = f.replicaset("foo-new", "default", 2, owner=deployment, created=NEW_TS,
                       pod_hash="new")
    old = f.replicaset("foo-old", "default", 2, owner=deployment, created=OLD_TS,
                       image=OLD_IMAGE, pod_hash="old")
    notes: list[str] = []
    assert replicaset_targets(deployment, [new, old], 2, notes) == {}
    assert notes and "Recreate" in notes[0]


# --- The next sync reads availability from before the victims went ----------------------
#
# sync.go `sync` (paused) and rolling.go `rolloutRolling` (unpaused) run again on the
# split's own ReplicaSet update; IsSaturated and reconcileOldReplicaSets read the new
# ReplicaSet's status.availableReplicas, which still counts the pods it is deleting
# (replica_set.go writes calculateStatus over the pods listed before the deletions) or
# is the value recorded before the scale. When that count is the new target, the old
# ReplicaSets go to 0, whatever the survivors' availability.

RACE_NOW = parse_time_ns("2026-03-15T12:00:00Z")
RACE_POLICY = parse_policy({"pools": [
    {"name": "inference", "deletionCost": 1000, "protected": True},
    {"name": "hybrid", "deletionCost": -100}]})
RECENT = "2026-03-15T11:59:50Z"  # ready 10 s before RACE_NOW


def race_cluster(paused: bool, unavailable: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """3 -> 2 mid-rollout (maxSurge 1, maxUnavailable 0, a rollout that stands still:
    one new pod is not available) splits to new 3 -> 2, old 1 -> 1. The old ReplicaSet
    runs on the protected pool, the new one on hybrid nodes; the new one deletes new-x (the
    cheapest) and keeps new-y and new-z, where new-z is not available (`unavailable`:
    "not-ready", "min-ready" or "both-min-ready", where new-y is not available either).
    """
    deployment = f.deployment("web", replicas=3, max_surge=1, max_unavailable=0)
    deployment["spec"]["paused"] = paused
    deployment["spec"]["minReadySeconds"] = 60
    old = f.replicaset("web-old", replicas=1, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created="2026-01-01T00:00:00Z")
    new = f.replicaset("web-new", replicas=3, owner=deployment, pod_hash="new",
                       created="2026-02-01T00:00:00Z", available=2)
    for rs in (old, new):
        f.annotate_rollout(rs, 3, 4)
    new_y_ready = RECENT if unavailable == "both-min-ready" else f.T0
    if unavailable == "not-ready":
        # The status was written while new-z was still ready; new-x, in phase Unknown,
        # goes before the Running new-z.
        new_x = f.pod("new-x", owner=new, node_name="hyb-1", phase="Unknown", ready=False)
        new_z = f.pod("new-z", owner=new, node_name="hyb-2", ready=False)
    else:
        new_x = f.pod("new-x", owner=new, node_name="hyb-1", cost="-100")
        new_z = f.pod("new-z", owner=new, node_name="hyb-2", ready_time=RECENT)
    if unavailable == "both-min-ready":
        new["status"]["availableReplicas"] = 1
    pods = [
        f.pod("old-a", owner=old, node_name="inf-1", cost="1000"),
        new_x,
        f.pod("new-y", owner=new, node_name="hyb-1", ready_time=new_y_ready),
        new_z,
    ]
    nodes = [f.node("inf-1", "inference"), f.node("inf-2", "inference"),
             f.node("hyb-1", "hybrid"), f.node("hyb-2", "hybrid")]
    return deployment, [deployment, old, new, *nodes, *pods]


@pytest.mark.parametrize("paused", [True, False])
@pytest.mark.parametrize("unavailable", ["not-ready", "min-ready"])
def test_a_stale_available_count_may_scale_the_old_replicasets_to_zero(paused, unavailable):
    deployment, objects = race_cluster(paused, unavailable)
    view = Snapshot(objects)
    assessment = assess_scale(view, RACE_POLICY, deployment, 2, RACE_NOW)
    prediction = assessment.prediction
    # The split itself, and the outcome where the status update lands first (unpaused,
    # maxUnavailable 0 lets the rollout take no old pod while new-z is unavailable).
    assert prediction.child_targets == {"web-old": (1, 1), "web-new": (3, 2)}
    assert [p.name for p in prediction.victims] == ["new-x"]
    # The other outcome: the old ReplicaSet goes to 0.
    assert [p.name for p in prediction.possible_victims] == ["old-a"]
    assert any("scales web-old to 0 (a race" in note for note in prediction.notes)
    # The worst case deletes the protected pod while new-y and new-z (hybrid) stay.
    assert assessment.verdict.allowed is False
    (violation,) = assessment.verdict.violations
    assert violation.message.startswith("may delete protected-pool pod old-a")
    assert "new-y (node hyb-1, pool hybrid)" in violation.message


@pytest.mark.parametrize("paused", [True, False])
def test_a_stale_count_below_the_target_keeps_the_old_replicasets(paused):
    deployment, objects = race_cluster(paused, "both-min-ready")
    assessment = assess_scale(Snapshot(objects), RACE_POLICY, deployment, 2, RACE_NOW)
    prediction = assessment.prediction
    assert prediction.child_targets == {"web-old": (1, 1), "web-new": (3, 2)}
    assert [p.name for p in prediction.victims] == ["new-x"]
    assert prediction.possible_victims == []
    assert prediction.tie_groups == []
    assert not any("a race" in note for note in prediction.notes)
    assert assessment.verdict.allowed is True
    assert assessment.verdict.violations == []


@pytest.mark.parametrize("paused", [True, False])
def test_an_unpaused_rollout_scales_a_new_replicaset_above_the_count_down(paused):
    """3 -> 2 with maxSurge 2: allowed 2 + 2 = 4 pods, the ReplicaSets hold 4, so the
    split changes nothing. Unpaused, rolling.go `reconcileNewReplicaSet` then scales the
    new ReplicaSet (3) down to 2: it deletes its unready pod, keeps two available ones, is
    saturated, and the old ReplicaSet goes to 0. Paused, `sync` only runs `scale`."""
    deployment = f.deployment("web", "default", 3, max_surge=2, max_unavailable=0)
    deployment["spec"]["paused"] = paused
    old = f.replicaset("web-old", "default", 1, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created=OLD_TS)
    new = f.replicaset("web-new", "default", 3, owner=deployment, pod_hash="new",
                       created=NEW_TS, available=2)
    for rs in (old, new):
        f.annotate_rollout(rs, 3, 5)
    pods = [f.pod("old-a", "default", owner=old, node_name="inf-1"),
            f.pod("new-a", "default", owner=new, node_name="inf-1"),
            f.pod("new-b", "default", owner=new, node_name="hyb-1"),
            f.pod("new-c", "default", owner=new, node_name="hyb-1", ready=False)]
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 2,
                               RACE_NOW)
    if paused:
        assert prediction.child_targets == {"web-old": (1, 1), "web-new": (3, 3)}
        assert prediction.victims == []
        return
    assert prediction.child_targets == {"web-old": (1, 0), "web-new": (3, 2)}
    assert sorted(p.name for p in prediction.victims) == ["new-c", "old-a"]
    assert prediction.possible_victims == []
    assert any("scales the new ReplicaSet web-new down to 2" in n for n in prediction.notes)


@pytest.mark.parametrize("paused", [True, False])
def test_a_stalled_rollout_goes_on_as_far_as_the_smaller_count_allows(paused):
    """5 -> 3, maxSurge 50%, maxUnavailable 25%: before, three pending new pods hold the
    rollout (maxScaledDown = 7 - 4 - 3 = 0). The split takes them (new 5 -> 3, old
    2 -> 2); unpaused, rolling.go `reconcileOldReplicaSets` then finds one pod to spare
    (maxScaledDown = 5 - 3 - 1) and may scale the old ReplicaSet to 1: it reads the
    availability from ReplicaSet statuses that may still count the split's victims, so
    the old pods are possible victims (one of them goes in the worst case), not certain."""
    deployment = f.deployment("web", "default", 5, max_surge="50%", max_unavailable="25%")
    deployment["spec"]["paused"] = paused
    old = f.replicaset("web-old", "default", 2, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created=OLD_TS)
    new = f.replicaset("web-new", "default", 5, owner=deployment, pod_hash="new",
                       created=NEW_TS, available=2)
    for rs in (old, new):
        f.annotate_rollout(rs, 5, 8)
    pods = [f.pod("old-a", "default", owner=old, node_name="inf-1"),
            f.pod("old-b", "default", owner=old, node_name="inf-2"),
            f.pod("new-a", "default", owner=new, node_name="hyb-1"),
            f.pod("new-b", "default", owner=new, node_name="hyb-2"),
            *(f.pod(f"new-p{i}", "default", owner=new, node_name="hyb-1", phase="Pending",
                    ready=False) for i in range(3))]
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 3,
                               RACE_NOW)
    assert prediction.child_targets == {"web-old": (2, 2), "web-new": (5, 3)}
    new_gone = [p.name for p in prediction.victims if p.name.startswith("new")]
    assert len(new_gone) == 2 and all(name.startswith("new-p") for name in new_gone)
    assert not any(p.name.startswith("old") for p in prediction.victims)
    possible = {p.name for p in prediction.possible_victims if p.name.startswith("old")}
    if paused:
        assert not possible
    else:
        assert possible == {"old-a", "old-b"}
        (group,) = [g for g in prediction.tie_groups if "old-a" in {p.name for p in g.members}]
        assert group.removed == 1 and "may scale web-old down to 1" in group.why
        assert any("maxUnavailable allows: web-old to 1" in n for n in prediction.notes)


def test_a_replicaset_scaled_down_then_up_loses_its_pods_at_the_lowest_size():
    """10 -> 9, maxSurge 50%, maxUnavailable 25%, minReadySeconds: the split takes the
    new ReplicaSet 9 -> 8 (its pending pod goes); `reconcileOldReplicaSets` then cleans
    one unhealthy old pod up (maxScaledDown = 14 - 7 - 6 = 1), and the next sync's
    `reconcileNewReplicaSet` scales the new ReplicaSet back to 9 with a new pod. The
    clean-up reads availability that may be stale, so the old pod it takes is possible,
    not certain; the new ReplicaSet's pending pod goes either way."""
    deployment = f.deployment("web", "default", 10, max_surge="50%", max_unavailable="25%")
    deployment["spec"]["minReadySeconds"] = 1800
    old = f.replicaset("web-old", "default", 6, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created=OLD_TS)
    new = f.replicaset("web-new", "default", 9, owner=deployment, pod_hash="new",
                       created=NEW_TS, available=2)
    for rs in (old, new):
        f.annotate_rollout(rs, 10, 15)

    def pods_of(rs: dict[str, Any], prefix: str, kinds: str) -> list[dict[str, Any]]:
        """a: available, r: ready within minReadySeconds, n: not ready, p: pending."""
        return [f.pod(f"{prefix}-{i}", "default", owner=rs, node_name=f"n-{i}",
                      phase="Pending" if k == "p" else "Running", ready=k in "ar",
                      ready_time=RECENT if k == "r" else f.T0)
                for i, k in enumerate(kinds)]

    pods = pods_of(old, "old", "aarrrn") + pods_of(new, "new", "aarrrrnnp")
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 9,
                               RACE_NOW)
    assert prediction.child_targets == {"web-old": (6, 6), "web-new": (9, 8)}
    assert [p.name for p in prediction.victims] == ["new-8"]
    (group,) = [g for g in prediction.tie_groups if "old-5" in {p.name for p in g.members}]
    assert group.removed == 1 and prediction.possible_victims[0].name.startswith("old")
