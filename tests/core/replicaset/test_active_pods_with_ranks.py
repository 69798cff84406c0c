"""The ReplicaSet controller's comparator and ranks, ported from Kubernetes' own tests.

Upstream sources (kubernetes/kubernetes):
- pkg/controller/controller_utils_test.go (recent version: table-driven
  TestSortingActivePods "Sorts by active pod", TestActivePodFiltering, and
  TestSortingActivePodsWithRanks with its equality and inequality tables, including the
  LogarithmicScaleDown cases ready2Hours/ready5Hours/ready10Hours and unscheduled5/8Hours).
- pkg/controller/controller_utils.go: ActivePodsWithRanks.Less, compareMaxContainerRestarts
  and maxContainerRestarts (regular containers first, then sidecars = init containers with
  restartPolicy Always, matched by name: kubernetes/kubernetes#124952). The stored test
  file predates that PR, so the sidecar cases here are written from the merged code.

Go's Less(i, j) is `compare_pods(i, j, now) < 0` here.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support import factories as f
from webhook.core.model.ranked_pod import ranked_pod
from webhook.core.objects.deletion_cost import DELETION_COST_ANNOTATION
from webhook.core.objects.kube import parse_time_ns
from webhook.core.objects.podfacts import go_log2
from webhook.core.replicaset.active_pods_with_ranks import (
    compare_pods,
    is_pod_active,
    max_restarts,
)
from webhook.core.replicaset.sort_keys import rank_pods, sort_ranked

NOW_DT = datetime(2026, 3, 15, 12, 0, 0, tzinfo=UTC)


def ns(moment: datetime) -> int:
    return int((moment - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1)) * 1000


def rfc3339(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


NOW = ns(NOW_DT)
NOW_T = NOW_DT
THEN_1_MONTH = NOW_DT.replace(month=2)  # now.AddDate(0, -1, 0)
THEN_2_HOURS = NOW_DT - timedelta(hours=2)
THEN_5_HOURS = NOW_DT - timedelta(hours=5)
THEN_8_HOURS = NOW_DT - timedelta(hours=8)
ZERO = None  # metav1.Time{}


def kpod(name: str, node: str, phase: str, ready: bool, restarts: int,
         ready_since: datetime | None, created: datetime | None,
         annotations: dict[str, str] | None = None, uid: str = "",
         sidecar_restarts: int | None = None) -> dict[str, Any]:
    """The `pod` helper of TestSortingActivePodsWithRanks, as an API dict.

    Conditions and container statuses exist only for ready pods; the UID is empty, as
    in the upstream test, unless given.
    """
    status: dict[str, Any] = {"phase": phase}
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    if ready:
        condition: dict[str, Any] = {"type": "Ready", "status": "True"}
        if ready_since:
            condition["lastTransitionTime"] = rfc3339(ready_since)
        status["conditions"] = [condition]
        status["containerStatuses"] = [{"name": "c", "restartCount": restarts}]
    if sidecar_restarts is not None:
        spec["initContainers"] = [{"name": "proxy", "restartPolicy": "Always"}]
        status["initContainerStatuses"] = [{"name": "proxy", "restartCount": sidecar_restarts}]
    metadata: dict[str, Any] = {"name": name, "uid": uid}
    if created:
        metadata["creationTimestamp"] = rfc3339(created)
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec, "status": status}


def less(a: dict[str, Any], rank_a: int, b: dict[str, Any], rank_b: int,
         now: int | None = NOW) -> bool:
    return compare_pods(ranked_pod(a, rank_a), ranked_pod(b, rank_b), now) < 0


# --- TestSortingActivePodsWithRanks ----------------------------------------------------

unscheduledPod = kpod("unscheduled", "", "Pending", False, 0, ZERO, ZERO)
scheduledPendingPod = kpod("pending", "node", "Pending", False, 0, ZERO, ZERO)
unknownPhasePod = kpod("unknown-phase", "node", "Unknown", False, 0, ZERO, ZERO)
runningNotReadyPod = kpod("not-ready", "node", "Running", False, 0, ZERO, ZERO)
runningReadyNoLastTransitionTimePod = kpod("ready-no-last-transition-time", "node", "Running",
                                           True, 0, ZERO, ZERO)
runningReadyNow = kpod("ready-now", "node", "Running", True, 0, NOW_T, NOW_T)
runningReadyThen = kpod("ready-then", "node", "Running", True, 0, THEN_1_MONTH, THEN_1_MONTH)
runningReadyNowHighRestarts = kpod("ready-high-restarts", "node", "Running", True, 9001,
                                   NOW_T, NOW_T)
runningReadyNowCreatedThen = kpod("ready-now-created-then", "node", "Running", True, 0, NOW_T,
                                  THEN_1_MONTH)
lowPodDeletionCost = kpod("low-deletion-cost", "node", "Running", True, 0, NOW_T, THEN_1_MONTH,
                          {DELETION_COST_ANNOTATION: "10"})
highPodDeletionCost = kpod("high-deletion-cost", "node", "Running", True, 0, NOW_T,
                           THEN_1_MONTH, {DELETION_COST_ANNOTATION: "100"})
unscheduled5Hours = kpod("unscheduled-5-hours", "", "Pending", False, 0, THEN_5_HOURS,
                         THEN_5_HOURS)
unscheduled8Hours = kpod("unscheduled-10-hours", "", "Pending", False, 0, THEN_8_HOURS,
                         THEN_8_HOURS)
ready2Hours = kpod("ready-2-hours", "", "Running", True, 0, THEN_2_HOURS, THEN_1_MONTH)
ready5Hours = kpod("ready-5-hours", "", "Running", True, 0, THEN_5_HOURS, THEN_1_MONTH)
ready10Hours = kpod("ready-10-hours", "", "Running", True, 0, THEN_8_HOURS, THEN_1_MONTH)

# equalityTests: (p1, p2); p2 None means p1 compared with itself. Ranks are 1 and 1.
EQUALITY_TESTS = [
    (unscheduledPod, None),
    (scheduledPendingPod, None),
    (unknownPhasePod, None),
    (runningNotReadyPod, None),
    (runningReadyNowCreatedThen, None),
    (runningReadyNow, None),
    (runningReadyThen, None),
    (runningReadyNowHighRestarts, None),
    (runningReadyNowCreatedThen, None),
    (unscheduled5Hours, unscheduled8Hours),  # same creation-time bucket, equal (empty) UIDs
    (ready5Hours, ready10Hours),  # same ready-time bucket, equal (empty) UIDs
]


@pytest.mark.parametrize(("p1", "p2"), EQUALITY_TESTS,
                         ids=[f"Equality tests {i}" for i in range(len(EQUALITY_TESTS))])
def test_sorting_active_pods_with_ranks_equality(p1, p2):
    p2 = p2 or p1
    assert not less(p1, 1, p2, 1)
    assert not less(p2, 1, p1, 1)
    assert compare_pods(ranked_pod(p1, 1), ranked_pod(p2, 1), NOW) == 0


# inequalityTests: (lesser, lesser rank, greater, greater rank).
INEQUALITY_TESTS = [
    (unscheduledPod, 1, scheduledPendingPod, 2),
    (unscheduledPod, 2, scheduledPendingPod, 1),
    (scheduledPendingPod, 1, unknownPhasePod, 2),
    (unknownPhasePod, 1, runningNotReadyPod, 2),
    (runningNotReadyPod, 1, runningReadyNoLastTransitionTimePod, 1),
    (runningReadyNoLastTransitionTimePod, 1, runningReadyNow, 1),
    (runningReadyNow, 2, runningReadyNoLastTransitionTimePod, 1),
    (runningReadyNow, 1, runningReadyThen, 1),
    (runningReadyNow, 2, runningReadyThen, 1),
    (runningReadyNowHighRestarts, 1, runningReadyNow, 1),
    (runningReadyNow, 2, runningReadyNowHighRestarts, 1),
    (runningReadyNow, 1, runningReadyNowCreatedThen, 1),
    (runningReadyNowCreatedThen, 2, runningReadyNow, 1),
    (lowPodDeletionCost, 2, highPodDeletionCost, 1),
    # Upstream case 14 ({highPodDeletionCost, 2} < {lowPodDeletionCost, 1} with the
    # PodDeletionCost gate disabled) is not ported: the gate is GA and always on.
    (ready2Hours, 1, ready5Hours, 1),
]


@pytest.mark.parametrize(("lesser", "lesser_rank", "greater", "greater_rank"),
                         INEQUALITY_TESTS,
                         ids=[f"Inequality tests {i if i < 14 else i + 1}"
                              for i in range(len(INEQUALITY_TESTS))])
def test_sorting_active_pods_with_ranks_inequality(lesser, lesser_rank, greater, greater_rank):
    assert less(lesser, lesser_rank, greater, greater_rank)
    assert not less(greater, greater_rank, lesser, lesser_rank)


# --- LogarithmicScaleDown: buckets, equal-bucket UIDs, zero times -----------------------


def test_log2_buckets_of_the_upstream_times():
    hour = 3600 * 10**9
    assert int(go_log2(2 * hour)) == 42
    assert int(go_log2(5 * hour)) == 44
    assert int(go_log2(8 * hour)) == 44  # same bucket as 5 hours: the equality case above
    assert go_log2(2.0**40) == 40.0  # exact for powers of two, as Go's Frexp path
    assert go_log2(2.0**40 - 1024) < 40.0


def test_equal_ready_bucket_decides_by_uid_and_skips_restarts_and_creation():
    # Both ready in the 2^44 ns bucket; b has 100 restarts and is newer, which rules 7
    # and 8 would put first, but Go returns uid_i < uid_j at once.
    a = kpod("a", "node", "Running", True, 0, THEN_5_HOURS, THEN_1_MONTH, uid="uid-a")
    b = kpod("b", "node", "Running", True, 100, THEN_8_HOURS, NOW_T, uid="uid-b")
    assert less(a, 1, b, 1)
    assert not less(b, 1, a, 1)
    # Swap the UIDs and the order flips.
    a2 = kpod("a", "node", "Running", True, 0, THEN_5_HOURS, THEN_1_MONTH, uid="uid-z")
    assert less(b, 1, a2, 1)


def test_equal_ready_times_fall_through_to_restarts():
    # Equal (not just same-bucket) ready times skip rule 6 entirely.
    a = kpod("a", "node", "Running", True, 0, THEN_5_HOURS, THEN_1_MONTH, uid="uid-a")
    b = kpod("b", "node", "Running", True, 100, THEN_5_HOURS, THEN_1_MONTH, uid="uid-b")
    assert less(b, 1, a, 1)
    assert not less(a, 1, b, 1)


def test_equal_creation_bucket_decides_by_uid():
    # Not ready, so rule 6 is skipped; no restarts; creation 5h vs 8h share a bucket.
    a = kpod("a", "", "Pending", False, 0, ZERO, THEN_8_HOURS, uid="uid-a")
    b = kpod("b", "", "Pending", False, 0, ZERO, THEN_5_HOURS, uid="uid-b")
    assert less(a, 1, b, 1)  # uid-a < uid-b, although b is newer
    assert not less(b, 1, a, 1)
    # Without a clock (Now zero), afterOrZero applies: the newer pod first.
    assert less(b, 1, a, 1, now=None)
    assert not less(a, 1, b, 1, now=None)


def test_different_buckets_put_the_more_recent_first():
    a = kpod("a", "node", "Running", True, 0, THEN_2_HOURS, THEN_1_MONTH, uid="uid-z")
    b = kpod("b", "node", "Running", True, 0, THEN_8_HOURS, THEN_1_MONTH, uid="uid-a")
    assert less(a, 1, b, 1)  # bucket 42 < 44; the UIDs do not matter
    assert not less(b, 1, a, 1)


def test_zero_ready_time_goes_first_even_with_a_clock():
    zero = kpod("zero", "node", "Running", True, 0, ZERO, NOW_T, uid="uid-z")
    old = kpod("old", "node", "Running", True, 0, THEN_1_MONTH, NOW_T, uid="uid-a")
    assert less(zero, 1, old, 1)
    assert not less(old, 1, zero, 1)


def test_zero_creation_time_goes_first():
    zero = kpod("zero", "node", "Pending", False, 0, ZERO, ZERO, uid="uid-z")
    new = kpod("new", "node", "Pending", False, 0, ZERO, NOW_T, uid="uid-a")
    for clock in (NOW, None):
        assert less(zero, 1, new, 1, now=clock)
        assert not less(new, 1, zero, 1, now=clock)


def test_future_ready_time_has_bucket_minus_one():
    # now - t <= 0 gives rank -1 (logarithmicRankDiff), below every positive age.
    future = kpod("future", "node", "Running", True, 0, NOW_DT + timedelta(hours=1),
                  THEN_1_MONTH, uid="uid-z")
    nowish = kpod("now", "node", "Running", True, 0, NOW_T, THEN_1_MONTH, uid="uid-a")
    second = kpod("second", "node", "Running", True, 0, NOW_DT - timedelta(seconds=1),
                  THEN_1_MONTH, uid="uid-0")
    # Both have bucket -1, so the UIDs decide ("uid-a" < "uid-z"), not the times.
    assert compare_pods(ranked_pod(nowish, 1), ranked_pod(future, 1), NOW) < 0
    assert compare_pods(ranked_pod(future, 1), ranked_pod(nowish, 1), NOW) > 0
    # -1 < int(log2(1e9)) = 29, whatever the UIDs say.
    assert compare_pods(ranked_pod(future, 1), ranked_pod(second, 1), NOW) < 0


# --- restarts of sidecars (kubernetes#124952) -------------------------------------------


def test_sidecar_restarts_break_a_regular_restart_tie():
    more = kpod("more", "node", "Running", True, 3, NOW_T, NOW_T, sidecar_restarts=7)
    fewer = kpod("fewer", "node", "Running", True, 3, NOW_T, NOW_T, sidecar_restarts=2)
    assert less(more, 1, fewer, 1)
    assert not less(fewer, 1, more, 1)


def test_regular_restarts_outweigh_sidecar_restarts():
    regular = kpod("regular", "node", "Running", True, 2, NOW_T, NOW_T, sidecar_restarts=0)
    sidecar = kpod("sidecar", "node", "Running", True, 1, NOW_T, NOW_T, sidecar_restarts=100)
    assert less(regular, 1, sidecar, 1)
    assert not less(sidecar, 1, regular, 1)


def test_sidecar_restarts_come_before_creation_time():
    flaky = kpod("flaky", "node", "Running", True, 0, NOW_T, THEN_1_MONTH, uid="uid-z",
                 sidecar_restarts=1)
    fresh = kpod("fresh", "node", "Running", True, 0, NOW_T, NOW_T, uid="uid-a",
                 sidecar_restarts=0)
    assert less(flaky, 1, fresh, 1)


def test_only_restartable_init_containers_count_as_sidecars():
    pod = kpod("p", "node", "Running", True, 4, NOW_T, NOW_T)
    pod["spec"]["initContainers"] = [
        {"name": "setup"},  # a plain init container: its restarts do not count
        {"name": "once", "restartPolicy": "OnFailure"},
        {"name": "proxy", "restartPolicy": "Always"},
        {"name": "agent", "restartPolicy": "Always"},
    ]
    pod["status"]["initContainerStatuses"] = [
        {"name": "setup", "restartCount": 50},
        {"name": "once", "restartCount": 40},
        {"name": "proxy", "restartCount": 3},
        {"name": "agent", "restartCount": 9},
        {"name": "ghost", "restartCount": 99},  # no matching spec entry
    ]
    pod["status"]["containerStatuses"] = [{"name": "c", "restartCount": 4},
                                          {"name": "d", "restartCount": 6}]
    assert max_restarts(pod) == (6, 9)
    plain = kpod("plain", "node", "Running", True, 6, NOW_T, NOW_T)
    assert max_restarts(plain) == (6, 0)
    assert less(pod, 1, plain, 1)  # same regular maximum, 9 sidecar restarts vs 0


# --- TestSortingActivePods ("Sorts by active pod") --------------------------------------


def _sorting_active_pods_table() -> list[dict[str, Any]]:
    then = THEN_1_MONTH

    def p(name: str, node: str, phase: str, *, ready: bool = False,
          ready_since: datetime | None = None, restarts: list[int] | None = None,
          created: datetime | None = None) -> dict[str, Any]:
        status: dict[str, Any] = {"phase": phase}
        if ready:
            condition: dict[str, Any] = {"type": "Ready", "status": "True"}
            if ready_since:
                condition["lastTransitionTime"] = rfc3339(ready_since)
            status["conditions"] = [condition]
        if restarts is not None:
            status["containerStatuses"] = [{"restartCount": r} for r in restarts]
        metadata: dict[str, Any] = {"name": name}
        if created:
            metadata["creationTimestamp"] = rfc3339(created)
        spec = {"nodeName": node} if node else {}
        return {"metadata": metadata, "spec": spec, "status": status}

    return [
        p("unscheduled", "", "Pending"),
        p("scheduledButPending", "bar", "Pending"),
        p("unknownPhase", "foo", "Unknown"),
        p("runningButNotReady", "foo", "Running"),
        p("runningNoLastTransitionTime", "foo", "Running", ready=True, restarts=[3, 0]),
        p("runningWithLastTransitionTime", "foo", "Running", ready=True, ready_since=NOW_T,
          restarts=[3, 0]),
        p("runningLongerTime", "foo", "Running", ready=True, ready_since=then, restarts=[3, 0]),
        p("lowerContainerRestartCount", "foo", "Running", ready=True, ready_since=then,
          restarts=[2, 1], created=NOW_T),
        p("oldest", "foo", "Running", ready=True, ready_since=then, restarts=[2, 1],
          created=then),
    ]


def test_sorting_active_pods_sorts_by_active_pod():
    # ActivePods.Less is ActivePodsWithRanks.Less without cost, rank and clock: with no
    # cost annotations, equal ranks and now=None (afterOrZero) the two coincide.
    pods = _sorting_active_pods_table()
    want = [pod["metadata"]["name"] for pod in pods]
    shuffler = random.Random(20)
    for _ in range(20):
        randomized = pods[:]
        shuffler.shuffle(randomized)
        got = [p.name for p in rank_pods(randomized, [], None)]
        assert got == want


# --- TestActivePodFiltering and the active filter ---------------------------------------


def test_active_pod_filtering():
    phases = {"pod-1": "Succeeded", "pod-2": "Failed", "pod-3": "Running",
              "pod-4": "Running", "pod-5": "Running"}
    pods = [{"metadata": {"name": n}, "status": {"phase": ph}} for n, ph in phases.items()]
    assert [p["metadata"]["name"] for p in pods if is_pod_active(p)] == ["pod-3", "pod-4",
                                                                         "pod-5"]


def test_pods_being_deleted_are_not_active():
    pod = f.pod("gone")
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    assert not is_pod_active(pod)
    assert is_pod_active(f.pod("here", phase="Pending"))
    assert is_pod_active(f.pod("odd", phase="Unknown"))


# --- sort_ranked agrees with the comparator ---------------------------------------------


def test_sort_ranked_orders_by_rules_then_comparator():
    rs = f.replicaset("web", replicas=1)
    pods = [
        f.pod("ready-old", owner=rs, node_name="n1", ready_time="2026-01-01T00:00:00Z"),
        f.pod("ready-new", owner=rs, node_name="n2", ready_time="2026-03-15T11:59:00Z"),
        f.pod("not-ready", owner=rs, node_name="n3", ready=False),
        f.pod("pending", owner=rs, node_name="n4", phase="Pending", ready=False),
        f.pod("unscheduled", owner=rs, node_name=None, phase="Pending", ready=False),
        f.pod("cheap", owner=rs, node_name="n5", cost="-10"),
    ]
    ranked = [ranked_pod(p, 0) for p in pods]
    shuffler = random.Random(7)
    for _ in range(10):
        shuffler.shuffle(ranked)
        ordered = [p.name for p in sort_ranked(list(ranked), NOW)]
        assert ordered == ["unscheduled", "pending", "not-ready", "cheap", "ready-new",
                           "ready-old"]


def test_ranked_pod_reads_the_first_ready_condition():
    pod = f.pod("p", ready=True, ready_time="2026-03-15T10:00:00Z")
    pod["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "lastTransitionTime": "2026-03-15T09:00:00Z"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-15T10:00:00Z"},
    ]
    ranked = ranked_pod(pod, 0)
    assert ranked.ready is False  # GetPodReadyCondition returns the first Ready condition
    assert ranked.ready_time_ns is None
    ok = f.pod("ok", ready_time="2026-03-15T10:00:00Z")
    assert ranked_pod(ok, 0).ready_time_ns == parse_time_ns("2026-03-15T10:00:00Z")
