"""Scale-down prediction for Deployments, ReplicaSets and StatefulSets.

Upstream sources (kubernetes/kubernetes):
- pkg/controller/deployment/sync.go (scale) and util/deployment_util.go
  (FindActiveOrLatest, IsSaturated): the syncs after a proportional split.
- pkg/controller/statefulset/stateful_set_control.go and stateful_set_utils.go:
  condemned pods (ordinal outside [start, start+replicas-1]) go highest ordinal first;
  getParentNameAndOrdinal parses `(.*)-([0-9]+)$` with ParseInt(.., 10, 32).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import factories as f
from webhook.core.objects.kube import parse_time_ns
from webhook.core.scale.predict import predict_scale
from webhook.core.statefulset.prediction import stateful_ordinal
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-03-15T12:00:00Z")
OLD_IMAGE = "foo/bar:old"


# --- predict_scale: Deployments ---------------------------------------------------------


def _rollout_cluster() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Deployment mid-rollout: old RS on node-a/node-b, new RS on node-b/node-c."""
    deployment = f.deployment("web", replicas=4, max_surge=0, max_unavailable=1)
    old = f.replicaset("web-old", replicas=2, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created="2026-01-01T00:00:00Z")
    new = f.replicaset("web-new", replicas=2, owner=deployment, pod_hash="new",
                       created="2026-02-01T00:00:00Z")
    for rs in (old, new):
        f.annotate_rollout(rs, 4, 4)
    pods = [
        f.pod("old-a", owner=old, node_name="node-a"),
        f.pod("old-b", owner=old, node_name="node-b"),
        f.pod("new-b", owner=new, node_name="node-b"),
        f.pod("new-c", owner=new, node_name="node-c"),
    ]
    return deployment, [deployment, old, new, *pods]


def test_deployment_victims_use_deployment_wide_ranks():
    deployment, objects = _rollout_cluster()
    prediction = predict_scale(Snapshot(objects), deployment, 2, NOW)
    # 4 -> 2 with two RSs of 2: each loses one (older first on equal size, fraction -1).
    assert prediction.child_targets == {"web-old": (2, 1), "web-new": (2, 1)}
    # node-b holds one pod of each RS: rank 2 across the Deployment, 1 elsewhere. Ranked
    # per RS alone every pod would have rank 1 and the choice would be a coin toss.
    assert sorted(p.name for p in prediction.victims) == ["new-b", "old-b"]
    assert {p.replica_set for p in prediction.victims} == {"web-old", "web-new"}
    # But that is the order where neither ReplicaSet has deleted yet. If one syncs first,
    # node-b loses its pod and the other ReplicaSet's two pods tie at rank 1: either may
    # go (tests/core/deployment/test_sync_orders.py covers the model).
    assert sorted(p.name for p in prediction.possible_victims) == ["new-c", "old-a"]


def test_scale_down_that_completes_the_new_replicaset_removes_the_old_ones():
    """The real controllers (an e2e differential state): 3 -> 2
    mid-rollout splits to new 3 -> 2, old 2 -> 2; the new ReplicaSet then keeps 2
    available pods, is saturated, and the Deployment controller's next sync scales the
    old ReplicaSet to 0. Its pods are victims of this scale-down too. The differential
    paused its rollouts (unpaused, the rollout would go on: see test_deployment_sync)."""
    deployment = f.deployment("web", replicas=3, max_surge=2, max_unavailable=0)
    deployment["spec"]["paused"] = True
    old = f.replicaset("web-old", replicas=2, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created="2026-01-01T00:00:00Z")
    new = f.replicaset("web-new", replicas=3, owner=deployment, pod_hash="new",
                       created="2026-02-01T00:00:00Z", available=2)
    for rs in (old, new):
        f.annotate_rollout(rs, 3, 5)
    pods = [
        f.pod("old-a", owner=old, node_name="node-a"),
        f.pod("old-b", owner=old, node_name="node-b"),
        f.pod("new-a", owner=new, node_name="node-a"),
        f.pod("new-b", owner=new, node_name="node-b"),
        f.pod("new-c", owner=new, node_name="node-c", phase="Unknown", ready=False),
    ]
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 2, NOW)
    assert prediction.child_targets == {"web-old": (2, 0), "web-new": (3, 2)}
    assert sorted(p.name for p in prediction.victims) == ["new-c", "old-a", "old-b"]
    assert prediction.possible_victims == []
    assert any("scales the old ReplicaSets to 0" in note for note in prediction.notes)
    # A kept pod that is not available: no saturation, the proportional split stands.
    pods[3] = f.pod("new-b", owner=new, node_name="node-b", ready=False)
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 2, NOW)
    assert prediction.child_targets == {"web-old": (2, 2), "web-new": (3, 2)}
    # minReadySeconds not yet elapsed since the pods became ready: not available either.
    pods[3] = f.pod("new-b", owner=new, node_name="node-b")
    deployment["spec"]["minReadySeconds"] = 10**9
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 2, NOW)
    assert prediction.child_targets == {"web-old": (2, 2), "web-new": (3, 2)}


def test_split_that_leaves_one_replicaset_with_pods_gives_it_the_new_count():
    """The real controllers (an e2e differential state): 6 -> 2 with maxSurge 50% splits to
    old 1 -> 0, new 8 -> 3 (2 + surge 1); on the next sync the new ReplicaSet is the only
    one with pods, and scale() sets it to exactly 2."""
    deployment = f.deployment("web", replicas=6, max_surge="50%", max_unavailable="25%")
    old = f.replicaset("web-old", replicas=1, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created="2026-01-01T00:00:00Z")
    new = f.replicaset("web-new", replicas=8, owner=deployment, pod_hash="new",
                       created="2026-02-01T00:00:00Z", available=3)
    for rs in (old, new):
        f.annotate_rollout(rs, 6, 9)
    pods = [f.pod("old-a", owner=old, node_name="node-a")]
    pods += [f.pod(f"new-{i}", owner=new, node_name=f"node-{i}", cost=str(i),
                   ready=i >= 5) for i in range(8)]
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 2, NOW)
    assert prediction.child_targets == {"web-old": (1, 0), "web-new": (8, 2)}
    assert sorted(p.name for p in prediction.victims) == [
        "new-0", "new-1", "new-2", "new-3", "new-4", "new-5", "old-a"]
    assert any("the only one with pods" in note for note in prediction.notes)


def test_two_syncs_of_one_replicaset_make_the_recounted_ranks_uncertain():
    """The real controllers (an e2e differential state): the new ReplicaSet goes 8 -> 3
    (the split), then 3 -> 2 (the next sync). Syncing once, both pods doubled up on
    node-a go (rank 2); syncing twice, one of them goes first and the other, alone on
    node-a by then, is tied on rules 1-5 with node-b's and node-c's pods. Any of them can
    go: rules 6-8 decide between them with the controller's clock (a later run of seed
    63 had our clock pick new-a2 in the second sync too, and node-c's pod went)."""
    deployment = f.deployment("web", replicas=6, max_surge="50%", max_unavailable="25%")
    old = f.replicaset("web-old", replicas=1, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created="2026-01-01T00:00:00Z")
    new = f.replicaset("web-new", replicas=8, owner=deployment, pod_hash="new",
                       created="2026-02-01T00:00:00Z", available=7)
    for rs in (old, new):
        f.annotate_rollout(rs, 6, 9)
    recent = "2026-03-15T11:59:30Z"  # ready 30 s before NOW: one age bucket
    pods = [f.pod("old-a", owner=old, node_name="hybrid-1", cost="-50"),
            f.pod("new-unready", owner=new, node_name="hybrid-3", cost="-100", ready=False),
            *[f.pod(f"new-hybrid-{i}", owner=new, node_name="hybrid-2", cost="-100")
              for i in range(3)],
            f.pod("new-a1", owner=new, node_name="node-a", cost="1000", ready_time=recent),
            f.pod("new-a2", owner=new, node_name="node-a", cost="1000", ready_time=recent),
            f.pod("new-b", owner=new, node_name="node-b", cost="1000", ready_time=recent),
            f.pod("new-c", owner=new, node_name="node-c", cost="1000",
                  ready_time="2026-03-14T12:00:00Z")]
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 2, NOW)
    assert prediction.child_targets == {"web-old": (1, 0), "web-new": (8, 2)}
    victims = {p.name for p in prediction.victims}
    assert victims == {"old-a", "new-unready", "new-hybrid-0", "new-hybrid-1",
                       "new-hybrid-2", "new-a1", "new-a2"}
    assert sorted(p.name for p in prediction.possible_victims) == ["new-b", "new-c"]
    uncertain = {p.name for g in prediction.tie_groups for p in g.members}
    assert uncertain == {"new-a1", "new-a2", "new-b", "new-c"}


def test_single_replicaset_deployment_gets_exactly_the_new_count():
    deployment = f.deployment("api", replicas=5)
    rs = f.replicaset("api-1", replicas=5, owner=deployment, pod_hash="h1")
    pods = [f.pod(f"api-{i}", owner=rs, node_name=f"n{i}", cost=str(i)) for i in range(5)]
    prediction = predict_scale(Snapshot([deployment, rs, *pods]), deployment, 3, NOW)
    assert prediction.child_targets == {"api-1": (5, 3)}
    assert [p.name for p in prediction.victims] == ["api-0", "api-1"]  # lowest costs
    assert [p.name for p in prediction.survivors] == ["api-2", "api-3", "api-4"]
    # An old RS scaled to 0 does not count as active.
    old = f.replicaset("api-0", replicas=0, owner=deployment, image=OLD_IMAGE,
                       pod_hash="h0", created="2025-01-01T00:00:00Z")
    prediction = predict_scale(Snapshot([deployment, rs, old, *pods]), deployment, 3, NOW)
    assert prediction.child_targets["api-1"] == (5, 3)
    assert prediction.child_targets["api-0"] == (0, 0)
    assert len(prediction.victims) == 2


def test_an_orphan_is_adopted_only_by_the_replicaset_whose_selector_it_matches():
    # An orphan pod (no controller) carrying the old ReplicaSet's pod-template-hash: the
    # old ReplicaSet would adopt it, the new one must not (ClaimPods checks the
    # selector). It is unscheduled, so it would be the new ReplicaSet's first victim.
    deployment = f.deployment("api", replicas=3)
    new = f.replicaset("api-1", replicas=3, owner=deployment, pod_hash="h1")
    old = f.replicaset("api-0", replicas=0, owner=deployment, image=OLD_IMAGE,
                       pod_hash="h0", created="2025-01-01T00:00:00Z")
    pods = [f.pod(f"api-{i}", owner=new, node_name=f"n{i}", cost=str(i)) for i in range(3)]
    stray = f.pod("stray", node_name=None, labels={"app": "api", "pod-template-hash": "h0"})
    prediction = predict_scale(Snapshot([deployment, new, old, *pods, stray]), deployment,
                               2, NOW)
    assert prediction.child_targets["api-1"] == (3, 2)
    by_replicaset = {(p.replica_set, p.name) for p in prediction.victims}
    assert ("api-1", "api-0") in by_replicaset  # lowest cost of the new one's own pods
    assert ("api-1", "stray") not in by_replicaset
    # The old ReplicaSet (0 replicas) adopts the orphan and deletes it, scale or not.
    assert ("api-0", "stray") in by_replicaset


def test_replicaset_without_controller_has_rank_zero_everywhere():
    rs = f.replicaset("solo", replicas=3)
    pods = [f.pod("s-a1", owner=rs, node_name="node-a", cost="5"),
            f.pod("s-a2", owner=rs, node_name="node-a", cost="5"),
            f.pod("s-b", owner=rs, node_name="node-b", cost="5")]
    prediction = predict_scale(Snapshot([rs, *pods]), rs, 2, NOW)
    assert {p.rank for p in prediction.order} == {0}
    [group] = prediction.tie_groups  # all three tie on rules 1-5
    assert len(group.members) == 3


# --- predict_scale: StatefulSets --------------------------------------------------------


def test_statefulset_deletes_highest_ordinal_first_with_start_ordinal():
    sts = f.statefulset("db", replicas=5, start=2)
    owner = {**sts, "spec": {**sts["spec"], "selector": {"matchLabels": {"app": "db"}}}}
    pods = [f.pod(f"db-{i}", owner=owner, node_name=f"n{i}") for i in (2, 3, 4, 5, 6)]
    prediction = predict_scale(Snapshot([sts, *pods]), sts, 3, NOW)
    assert [p.name for p in prediction.victims] == ["db-6", "db-5"]
    assert sorted(p.name for p in prediction.survivors) == ["db-2", "db-3", "db-4"]
    assert [p.name for p in prediction.order] == ["db-6", "db-5", "db-4", "db-3", "db-2"]


def test_statefulset_ignores_deletion_cost_and_sorts_ordinals_numerically():
    sts = f.statefulset("db", replicas=11)
    pods = [f.pod(f"db-{i}", owner=sts, node_name="n", cost="-100" if i == 0 else "100")
            for i in range(11)]
    prediction = predict_scale(Snapshot([sts, *pods]), sts, 8, NOW)
    assert [p.name for p in prediction.victims] == ["db-10", "db-9", "db-8"]


def test_statefulset_ignores_pods_that_are_not_members():
    sts = f.statefulset("db", replicas=3)
    members = [f.pod(f"db-{i}", owner=sts) for i in range(3)]
    outsiders = [
        f.pod("db-x", owner=sts),  # no ordinal
        f.pod("dbx-9", owner=sts),  # another parent name
        f.pod("db-99999999999", owner=sts),  # ordinal beyond int32: ParseInt fails
        f.pod("db-7", owner=sts, phase="Failed", ready=False),  # not active
    ]
    prediction = predict_scale(Snapshot([sts, *members, *outsiders]), sts, 1, NOW)
    assert [p.name for p in prediction.victims] == ["db-2", "db-1"]


@pytest.mark.parametrize(("pod_name", "set_name", "expected"), [
    ("web-0", "web", 0),
    ("web-12", "web", 12),
    ("web-0-1", "web-0", 1),
    ("web-0-1", "web", None),
    ("web", "web", None),
    ("web-", "web", None),
    ("web-01", "web", 1),
    ("web-2147483647", "web", 2147483647),
    ("web-2147483648", "web", None),
    ("web-1\n", "web", None),
])
def test_stateful_ordinal(pod_name, set_name, expected):
    assert stateful_ordinal(pod_name, set_name) == expected


# --- what blocks or bends a prediction --------------------------------------------------


def test_statefulset_order_puts_condemned_ordinals_below_a_raised_start_first():
    # ordinals.start raised from 0 to 2: db-0 and db-1 are outside [2, 4] and go, the
    # highest condemned ordinal first; the order then goes on with the pods in range.
    sts = f.statefulset("db", replicas=3, start=2)
    pods = [f.pod(f"db-{i}", owner=sts, node_name=f"n{i}") for i in range(5)]
    prediction = predict_scale(Snapshot([sts, *pods]), sts, 3, NOW)
    assert [p.name for p in prediction.victims] == ["db-1", "db-0"]
    assert [p.name for p in prediction.order] == ["db-1", "db-0", "db-4", "db-3", "db-2"]


def test_ordered_ready_statefulset_says_what_blocks_the_scale_down():
    sts = f.statefulset("db", replicas=4)
    pods = [f.pod("db-0", owner=sts), f.pod("db-1", owner=sts, ready=False),
            f.pod("db-3", owner=sts)]  # db-2 is missing
    prediction = predict_scale(Snapshot([sts, *pods]), sts, 3, NOW)
    assert prediction.victims == []  # db-3 goes only once db-1 is Running and Ready
    assert [(b.pod.name, b.waiting_on) for b in prediction.blocked] == [("db-3", "db-1")]
    assert [p.name for p in prediction.order] == ["db-3", "db-1", "db-0"]
    (note,) = prediction.notes
    assert note == ("OrderedReady: nothing is deleted while a pod in the new range is not "
                    "Running and Ready; waiting for db-1, db-2 (missing)")
    parallel = {**sts, "spec": {**sts["spec"], "podManagementPolicy": "Parallel"}}
    assert predict_scale(Snapshot([parallel, *pods]), parallel, 3, NOW).notes == []


def test_pods_with_an_invalid_cost_are_named_with_the_raw_value():
    rs = f.replicaset("web", replicas=3)
    pods = [f.pod("web-a", owner=rs, cost="007"), f.pod("web-b", owner=rs, cost="+5"),
            f.pod("web-c", owner=rs, cost="12")]
    prediction = predict_scale(Snapshot([rs, *pods]), rs, 2, NOW)
    assert ('invalid deletion cost on web-a ("007"), web-b ("+5"); the ReplicaSet controller '
            "counts it as 0") in prediction.notes
