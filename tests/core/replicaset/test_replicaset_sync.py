"""ReplicaSet victim selection sync by sync, ported from Kubernetes' own tests.

Upstream sources (kubernetes/kubernetes):
- pkg/controller/replicaset/replica_set_test.go: TestGetPodsToDelete (with related pods).
- pkg/controller/replicaset/replica_set.go: getPodsToDelete, BurstReplicas = 500,
  getPodsRankedByRelatedPodsOnSameNode (only active related pods count).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support import factories as f
from webhook.core.model.burst_replicas import BURST_REPLICAS
from webhook.core.replicaset.replicaset_sync import predict_deletions

NOW_DT = datetime(2026, 3, 15, 12, 0, 0, tzinfo=UTC)
NOW = int((NOW_DT - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1)) * 1000


def test_inactive_pods_are_neither_victims_nor_counted_in_the_diff():
    rs = f.replicaset("web", replicas=2)
    running = [f.pod(f"run-{i}", owner=rs, node_name=f"n{i}") for i in range(3)]
    done = f.pod("done", owner=rs, phase="Succeeded", ready=False)
    failed = f.pod("failed", owner=rs, phase="Failed", ready=False)
    leaving = f.pod("leaving", owner=rs, phase="Pending", ready=False, node_name=None)
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    pods = [*running, done, failed, leaving]
    deletion = predict_deletions(pods, pods, 2, NOW)
    assert len(deletion.victims) == 1  # 3 active - 2 replicas
    assert deletion.victims[0].name.startswith("run-")
    assert {p.name for p in deletion.order} == {"run-0", "run-1", "run-2"}


def test_inactive_related_pods_do_not_raise_a_nodes_rank():
    rs = f.replicaset("web", replicas=2)
    a1 = f.pod("a1", owner=rs, node_name="node-a")
    a2 = f.pod("a2", owner=rs, node_name="node-a")
    b = f.pod("b", owner=rs, node_name="node-b")
    failed = f.pod("failed-b", owner=rs, node_name="node-b", phase="Failed", ready=False)
    leaving = f.pod("leaving-b", owner=rs, node_name="node-b")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    pods = [a1, a2, b, failed, leaving]
    deletion = predict_deletions(pods, pods, 2, NOW)
    # Active ranks: node-a 2, node-b 1. Counting the inactive pods would make node-b 3.
    assert [p.node_name for p in deletion.victims] == ["node-a"]
    assert {p.rank for p in deletion.order} == {2, 1}


# --- TestGetPodsToDelete ----------------------------------------------------------------


def _get_pods_to_delete_pods() -> dict[str, dict[str, Any]]:
    """The pods of TestGetPodsToDelete, built as newPod(name, rs, phase, nil, true) does."""
    rs = f.replicaset("foo", replicas=1)

    def new_pod(name: str, phase: str, node: str | None,
                ready: bool | None = None) -> dict[str, Any]:
        pod = f.pod(name, owner=rs, node_name=node, phase=phase, ready_time=None, created=None)
        conditions = []
        if ready is not None:
            conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
        elif phase == "Running":  # newPod gives running pods a Ready=True condition
            conditions = [{"type": "Ready", "status": "True"}]
        pod["status"]["conditions"] = conditions
        pod["status"]["containerStatuses"] = []
        return pod

    return {
        "unscheduledPendingPod": new_pod("unscheduled-pending-pod", "Pending", None),
        "scheduledPendingPod": new_pod("scheduled-pending-pod", "Pending", "fake-node"),
        "scheduledRunningNotReadyPod": new_pod("scheduled-running-not-ready-pod", "Running",
                                               "fake-node", ready=False),
        "scheduledRunningReadyPodOnNode1": new_pod("scheduled-running-ready-pod-on-node-1",
                                                   "Running", "fake-node-1", ready=True),
        "scheduledRunningReadyPodOnNode2": new_pod("scheduled-running-ready-pod-on-node-2",
                                                   "Running", "fake-node-2", ready=True),
    }


# (name, pods, related (None: the pods), diff, expected pods to delete, order matters)
GET_PODS_TO_DELETE_CASES = [
    ("len(pods) = 0 (i.e., diff = 0 too)", [], None, 0, [], True),
    # diff = len(pods): Go returns the input unsorted, so only the set is comparable.
    ("diff = len(pods)",
     ["scheduledRunningNotReadyPod", "scheduledRunningReadyPodOnNode1"], None, 2,
     ["scheduledRunningNotReadyPod", "scheduledRunningReadyPodOnNode1"], False),
    ("diff < len(pods)",
     ["scheduledRunningReadyPodOnNode1", "scheduledRunningNotReadyPod"], None, 1,
     ["scheduledRunningNotReadyPod"], True),
    ("various pod phases and conditions, diff = len(pods)",
     ["scheduledRunningReadyPodOnNode1", "scheduledRunningReadyPodOnNode1",
      "scheduledRunningReadyPodOnNode2", "scheduledRunningNotReadyPod", "scheduledPendingPod",
      "unscheduledPendingPod"], None, 6,
     ["scheduledRunningReadyPodOnNode1", "scheduledRunningReadyPodOnNode1",
      "scheduledRunningReadyPodOnNode2", "scheduledRunningNotReadyPod", "scheduledPendingPod",
      "unscheduledPendingPod"], False),
    ("various pod phases and conditions, diff = len(pods), relatedPods empty",
     ["scheduledRunningReadyPodOnNode1", "scheduledRunningReadyPodOnNode1",
      "scheduledRunningReadyPodOnNode2", "scheduledRunningNotReadyPod", "scheduledPendingPod",
      "unscheduledPendingPod"], [], 6,
     ["scheduledRunningReadyPodOnNode1", "scheduledRunningReadyPodOnNode1",
      "scheduledRunningReadyPodOnNode2", "scheduledRunningNotReadyPod", "scheduledPendingPod",
      "unscheduledPendingPod"], False),
    ("scheduled vs unscheduled, diff < len(pods)",
     ["scheduledPendingPod", "unscheduledPendingPod"], None, 1, ["unscheduledPendingPod"], True),
    ("ready vs not-ready, diff < len(pods)",
     ["scheduledRunningReadyPodOnNode1", "scheduledRunningNotReadyPod",
      "scheduledRunningNotReadyPod"], None, 2,
     ["scheduledRunningNotReadyPod", "scheduledRunningNotReadyPod"], True),
    ("ready and colocated with another ready pod vs not colocated, diff < len(pods)",
     ["scheduledRunningReadyPodOnNode1", "scheduledRunningReadyPodOnNode2"],
     ["scheduledRunningReadyPodOnNode1", "scheduledRunningReadyPodOnNode2",
      "scheduledRunningReadyPodOnNode2"], 1, ["scheduledRunningReadyPodOnNode2"], True),
    ("pending vs running, diff < len(pods)",
     ["scheduledPendingPod", "scheduledRunningNotReadyPod"], None, 1, ["scheduledPendingPod"],
     True),
    ("various pod phases and conditions, diff < len(pods)",
     ["scheduledRunningReadyPodOnNode1", "scheduledRunningReadyPodOnNode2",
      "scheduledRunningNotReadyPod", "scheduledPendingPod", "unscheduledPendingPod"], None, 3,
     ["unscheduledPendingPod", "scheduledPendingPod", "scheduledRunningNotReadyPod"], True),
]


@pytest.mark.parametrize(("pods", "related", "diff", "expected", "ordered"),
                         [case[1:] for case in GET_PODS_TO_DELETE_CASES],
                         ids=[case[0] for case in GET_PODS_TO_DELETE_CASES])
def test_get_pods_to_delete(pods, related, diff, expected, ordered):
    table = _get_pods_to_delete_pods()
    pod_list = [table[name] for name in pods]
    related_list = pod_list if related is None else [table[name] for name in related]
    deletion = predict_deletions(pod_list, related_list, len(pod_list) - diff, NOW)
    got = [p.name for p in deletion.victims]
    want = [table[name]["metadata"]["name"] for name in expected]
    assert got == want if ordered else sorted(got) == sorted(want)


# --- the 500 burst ----------------------------------------------------------------------


def test_burst_replicas_is_500():
    assert BURST_REPLICAS == 500


def test_each_sync_of_at_most_500_deletions_re_ranks_what_is_left():
    # 501 pods on node-a, 2 on node-b, scale 503 -> 1 (diff 502).
    # One pass would delete the 501 node-a pods (rank 501) and one node-b pod.
    # With the 500 cap: sync 1 deletes 500 node-a pods; sync 2 sees node-a 1, node-b 2,
    # so both node-b pods go and a node-a pod survives.
    rs = f.replicaset("big", replicas=1)
    pods = [f.pod(f"a-{i:03d}", owner=rs, node_name="node-a") for i in range(501)]
    pods += [f.pod(f"b-{i}", owner=rs, node_name="node-b") for i in range(2)]
    deletion = predict_deletions(pods, pods, 1, NOW)
    survivors = deletion.order[len(deletion.victims):]
    assert len(deletion.victims) == 502
    assert [p.node_name for p in survivors] == ["node-a"]
    assert [p.node_name for p in deletion.victims[500:]] == ["node-b", "node-b"]
    single_pass = predict_deletions(pods, pods, 1, NOW, burst=10_000)
    assert [p.node_name for p in single_pass.order[502:]] == ["node-b"]


def test_burst_parameter_splits_the_syncs():
    rs = f.replicaset("web", replicas=2)
    a = [f.pod(f"a{i}", owner=rs, node_name="node-a") for i in range(3)]
    b = [f.pod(f"b{i}", owner=rs, node_name="node-b") for i in range(2)]
    pods = a + b
    one_pass = predict_deletions(pods, pods, 2, NOW)
    assert sorted(p.name for p in one_pass.victims) == ["a0", "a1", "a2"]
    two_syncs = predict_deletions(pods, pods, 2, NOW, burst=2)
    # Sync 1: two node-a pods (rank 3). Sync 2: node-a 1 left vs node-b 2: a node-b pod.
    assert [p.node_name for p in two_syncs.victims] == ["node-a", "node-a", "node-b"]


# --- tie groups on rules 1-5 ------------------------------------------------------------


def _ready_pods(rs: dict[str, Any], costs: dict[str, str | None]) -> list[dict[str, Any]]:
    return [f.pod(name, owner=rs, node_name=f"node-{name}", cost=cost)
            for name, cost in costs.items()]


def test_tie_group_straddling_the_cut_is_reported():
    rs = f.replicaset("web", replicas=2)
    pods = _ready_pods(rs, {"p1": None, "p2": None, "p3": None})
    deletion = predict_deletions(pods, pods, 2, NOW)
    assert len(deletion.victims) == 1
    assert len(deletion.tie_groups) == 1
    group = deletion.tie_groups[0]
    assert sorted(p.name for p in group.members) == ["p1", "p2", "p3"]
    assert group.removed == 1
    assert sorted(p.name for p in deletion.possible_victims) == sorted(
        {"p1", "p2", "p3"} - {deletion.victims[0].name})


def test_tie_group_is_reported_even_when_rules_6_to_8_differ():
    rs = f.replicaset("web", replicas=1)
    young = f.pod("young", owner=rs, node_name="n1", ready_time="2026-03-15T11:00:00Z")
    old = f.pod("old", owner=rs, node_name="n2", ready_time="2026-01-01T00:00:00Z",
                restarts=5)
    deletion = predict_deletions([young, old], [young, old], 1, NOW)
    assert [p.name for p in deletion.victims] == ["young"]  # best prediction: newer ready
    assert [p.name for p in deletion.possible_victims] == ["old"]


def test_tie_group_not_straddling_the_cut_is_not_reported():
    rs = f.replicaset("web", replicas=2)
    pods = _ready_pods(rs, {"cheap": "-1", "t1": "0", "t2": "0"})
    deletion = predict_deletions(pods, pods, 2, NOW)
    assert [p.name for p in deletion.victims] == ["cheap"]
    assert deletion.tie_groups == []
    assert deletion.possible_victims == []


def test_tie_group_wholly_among_victims_is_not_reported():
    rs = f.replicaset("web", replicas=1)
    pods = _ready_pods(rs, {"t1": "-5", "t2": "-5", "keep": "10"})
    deletion = predict_deletions(pods, pods, 1, NOW)
    assert sorted(p.name for p in deletion.victims) == ["t1", "t2"]
    assert deletion.tie_groups == []


def test_tie_group_covers_only_pods_equal_on_rules_1_to_5():
    rs = f.replicaset("web", replicas=2)
    pods = _ready_pods(rs, {"low": "-3", "a": "0", "b": "0", "high": "7"})
    deletion = predict_deletions(pods, pods, 2, NOW)
    assert deletion.victims[0].name == "low"
    [group] = deletion.tie_groups
    assert sorted(p.name for p in group.members) == ["a", "b"]
    assert group.removed == 1
    assert [p.name for p in deletion.order][-1] == "high"


def test_no_deletion_when_replicas_cover_active_pods():
    rs = f.replicaset("web", replicas=3)
    pods = _ready_pods(rs, {"a": None, "b": None})
    deletion = predict_deletions(pods, pods, 3, NOW)
    assert deletion.victims == []
    assert deletion.tie_groups == []
    assert len(deletion.order) == 2
