"""The CloneSet's deletion order: upstream's pod_sorter tests (kruise v1.8.0,
pkg/controller/cloneset/utils/pod_sorter_test.go: TestSortingActivePods, TestSameNodeRanker),
and the one-key form of the comparator pinned to the comparator rule by rule."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.cloneset.cloneset_pod import CloneSetPod
from webhook.core.cloneset.pod_sorter import less, same_node_ranks, sort_key
from webhook.core.objects.kube import format_time_ns, parse_time_ns
from webhook.core.objects.podfacts import PodFacts

NOW = parse_time_ns("2026-03-15T12:00:00Z")
THEN = parse_time_ns("2026-02-15T12:00:00Z")  # a month before, as upstream's AddDate(0, -1, 0)
COST = "controller.kubernetes.io/pod-deletion-cost"


def go_pod(name: str, node: str, phase: str, ready: bool, restarts: int = 0,
           ready_since: int | None = None, created: int | None = None,
           annotations: dict[str, str] | None = None, uid: str = "") -> CloneSetPod:
    """Upstream's test `pod(...)`: conditions and container statuses only when ready."""
    metadata: dict[str, Any] = {"name": name, "uid": uid}
    if created is not None:
        metadata["creationTimestamp"] = format_time_ns(created)
    if annotations:
        metadata["annotations"] = annotations
    status: dict[str, Any] = {"phase": phase}
    if ready:
        condition: dict[str, Any] = {"type": "Ready", "status": "True"}
        if ready_since is not None:
            condition["lastTransitionTime"] = format_time_ns(ready_since)
        status["conditions"] = [condition]
        status["containerStatuses"] = [{"name": "c", "restartCount": restarts}]
    return CloneSetPod(PodFacts({"metadata": metadata, "spec": {"nodeName": node},
                                 "status": status}))


UNSCHEDULED = go_pod("unscheduled", "", "Pending", False)
PENDING = go_pod("pending", "node", "Pending", False)
UNKNOWN = go_pod("unknown-phase", "node", "Unknown", False)
NOT_READY = go_pod("not-ready", "node", "Running", False)
READY_NO_TIME = go_pod("ready-no-last-transition-time", "node", "Running", True)
READY_NOW = go_pod("ready-now", "node", "Running", True, 0, NOW, NOW)
READY_THEN = go_pod("ready-then", "node", "Running", True, 0, THEN, THEN)
HIGH_RESTARTS = go_pod("ready-high-restarts", "node", "Running", True, 9001, NOW, NOW)
CREATED_THEN = go_pod("ready-now-created-then", "node", "Running", True, 0, NOW, THEN)
LOW_COST = go_pod("low-deletion-cost", "node", "Running", True, 0, NOW, THEN, {COST: "10"})
HIGH_COST = go_pod("high-deletion-cost", "node", "Running", True, 0, NOW, THEN, {COST: "100"})

EQUALITY = [UNSCHEDULED, PENDING, UNKNOWN, NOT_READY, CREATED_THEN, READY_NOW, READY_THEN,
            HIGH_RESTARTS, CREATED_THEN]
INEQUALITY = [(UNSCHEDULED, PENDING), (UNSCHEDULED, PENDING), (PENDING, UNKNOWN),
              (UNKNOWN, NOT_READY), (NOT_READY, READY_NO_TIME), (READY_NO_TIME, READY_NOW),
              (READY_NOW, READY_THEN), (HIGH_RESTARTS, READY_NOW), (READY_NOW, CREATED_THEN),
              (LOW_COST, HIGH_COST)]


@pytest.mark.parametrize("pod", EQUALITY, ids=lambda p: p.name)
def test_no_pod_is_less_than_itself(pod: CloneSetPod) -> None:
    assert not less(pod, pod, 0, 0, None)
    assert sort_key(pod, 0, True) == sort_key(pod, 0, True)


@pytest.mark.parametrize(("lesser", "greater"), INEQUALITY,
                         ids=[f"{a.name}<{b.name}" for a, b in INEQUALITY])
def test_upstream_inequalities(lesser: CloneSetPod, greater: CloneSetPod) -> None:
    assert less(lesser, greater, 0, 0, None)
    assert not less(greater, lesser, 0, 0, None)
    assert sort_key(lesser, 0, True) < sort_key(greater, 0, True)


def test_the_deletion_cost_is_honoured_before_the_rank() -> None:
    """Rule 4 before rule 5: a cheaper pod goes first even alone on its node."""
    assert less(LOW_COST, HIGH_COST, 0, 5, None)


def test_not_available_goes_before_available_then_not_ready_before_ready() -> None:
    def available(pod: CloneSetPod) -> bool:
        return pod is READY_THEN
    assert less(READY_NOW, READY_THEN, 0, 0, available)
    assert not less(READY_THEN, READY_NOW, 0, 0, available)


def test_same_node_ranker_upstream() -> None:
    """node a: 0, 4, 10; node b: 3, 6; node c: 5; node d: 7, 8, 9; 1 and 2 unscheduled."""
    nodes = {"0": "a", "1": "", "2": "", "3": "b", "4": "a", "5": "c", "6": "b", "7": "d",
             "8": "d", "9": "d", "10": "a"}
    pods = [CloneSetPod(PodFacts({"metadata": {"uid": uid}, "spec": {"nodeName": node}}))
            for uid, node in nodes.items()]
    ranks, interchangeable = same_node_ranks(pods)
    by_uid = {pod.facts.uid.decode(): ranks[id(pod)] for pod in pods if id(pod) in ranks}
    assert by_uid == {"0": 2, "4": 1, "3": 1, "7": 2, "8": 1}
    # Every pod of a node ties with the others there: which gets which rank is the list's
    # order (an informer's), not knowable.
    assert sorted(sorted(p.facts.uid.decode() for p in members)
                  for members in interchangeable) == [["0", "10", "4"], ["3", "6"],
                                                      ["7", "8", "9"]]


def test_a_node_ranks_its_pods_by_the_comparator() -> None:
    """The pod a node keeps longest gets rank 0, the first to go the highest."""
    pods = [go_pod("old", "n", "Running", True, 0, THEN, THEN),
            go_pod("new", "n", "Running", True, 0, NOW, NOW),
            go_pod("pending", "n", "Pending", False)]
    ranks, interchangeable = same_node_ranks(pods)
    assert [ranks.get(id(p), 0) for p in pods] == [0, 1, 2]
    assert interchangeable == []


TIMES = st.sampled_from([None, THEN, NOW - 10**9, NOW])


@st.composite
def pods(draw: st.DrawFn) -> CloneSetPod:
    ready = draw(st.booleans())
    annotations = {COST: draw(st.sampled_from(["-5", "0", "7", "x"]))} if draw(
        st.booleans()) else None
    return go_pod(draw(st.sampled_from(["a", "b"])), draw(st.sampled_from(["", "n1", "n2"])),
                  draw(st.sampled_from(["Pending", "Unknown", "Running", "Succeeded"])), ready,
                  draw(st.integers(0, 2)), draw(TIMES), draw(TIMES), annotations)


@given(pods(), pods(), st.integers(0, 2), st.integers(0, 2), st.booleans(), st.booleans())
def test_the_key_orders_as_the_comparator(a: CloneSetPod, b: CloneSetPod, rank_a: int,
                                          rank_b: int, avail_a: bool, avail_b: bool) -> None:
    """sort_key(a) < sort_key(b) exactly when Less(a, b): the comparator is a lexicographic
    key (a strict weak order), so Go's sort leaves only exact ties to the list order."""
    availability = {id(a): avail_a, id(b): avail_b}
    if a is b:
        return

    def available(pod: CloneSetPod) -> bool:
        return availability[id(pod)]
    key_a, key_b = sort_key(a, rank_a, avail_a), sort_key(b, rank_b, avail_b)
    assert (key_a < key_b) == less(a, b, rank_a, rank_b, available)
    assert (key_b < key_a) == less(b, a, rank_b, rank_a, available)
