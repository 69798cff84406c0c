"""The fast victim prediction gives exactly the order of a plain sort-everything core.

`test_fast_path_property` checks that every prediction is one the controller allows.
This one pins down which of the allowed ones: where rules 6-8 are not a strict weak
order (pods ready at the same instant fall through to restarts while the others go by
UID), the predicted victims inside a tie group are the ones Python's sort with the
comparator puts first, and that depends on the order the sort is given. The reference
below is the core as first written: at every sync, rank what is left, sort it all by
rules 1-5 and the documented key for rules 6-8 (pods ready at the same instant as one
class at their smallest UID), sort the group the cut splits with `compare_pods`
itself, cut, re-rank. The fast path (integer keys, levels carried over syncs, the
comparator's answers read from per-pod fields) must give the same victims, order,
ranks and tie groups. States are drawn so that ready instants are shared often.
"""

from __future__ import annotations

from collections import Counter
from functools import cmp_to_key
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import factories as f
from webhook.core.model.ranked_pod import RankedPod, log_bucket, ranked_pod
from webhook.core.objects.kube import format_time_ns
from webhook.core.replicaset.active_pods_with_ranks import compare_pods
from webhook.core.replicaset.replicaset_sync import predict_deletions

NOW = 1_800_000_000 * 10**9

# --- the reference ---------------------------------------------------------------------


def within_key(pod: RankedPod, now: int | None, class_uid: bytes) -> tuple[Any, ...]:
    """Rules 6-8 as a key for pods tied on rules 1-5 (exact without a clock)."""
    rest: tuple[Any, ...]
    if now is None:
        rest = (-pod.restarts, -pod.sidecar_restarts, pod.created_ns is not None,
                -(pod.created_ns or 0), pod.uid)
        if pod.ready:
            return (pod.ready_time_ns is not None, -(pod.ready_time_ns or 0), *rest)
        return rest
    rest = (-pod.restarts, -pod.sidecar_restarts, pod.created_ns is not None,
            log_bucket(pod.created_ns, now), pod.uid)
    if pod.ready:
        return (pod.ready_time_ns is not None, log_bucket(pod.ready_time_ns, now), class_uid,
                pod.ready_time_ns or 0, *rest)
    return rest


def sort_by_key(pods: list[RankedPod], now: int | None) -> list[RankedPod]:
    """Rules 1-5, then `within_key`; a class is the pods of one rules 1-5 group ready
    at the same instant, placed at their smallest UID."""
    classes: dict[tuple[Any, ...], bytes] = {}
    for pod in pods:
        if pod.ready:
            instant = (pod.key_rules_1_to_5, pod.ready_time_ns)
            classes[instant] = min(classes.get(instant, pod.uid), pod.uid)
    return sorted(pods, key=lambda p: (p.key_rules_1_to_5, within_key(
        p, now, classes.get((p.key_rules_1_to_5, p.ready_time_ns), b"") if now else b"")))


def reference(pods: list[dict], related: list[dict], replicas: int, now: int | None,
              burst: int) -> tuple[list[RankedPod], list[RankedPod], list[tuple[list, int]]]:
    """(victims, order, each sync's tie group as (member names, removed)) as first
    written."""
    active = [p for p in related if is_active(p)]
    per_node = Counter(p["spec"].get("nodeName") or "" for p in active)
    counted = {p["metadata"]["name"] for p in active}
    remaining = [ranked_pod(p, per_node[p["spec"].get("nodeName") or ""])
                 for p in pods if is_active(p)]
    diff = len(remaining) - replicas
    victims: list[RankedPod] = []
    groups: list[tuple[list, int]] = []
    while True:
        ordered = sort_by_key(remaining, now)
        batch = min(diff, burst)
        if batch <= 0:
            return victims, victims + ordered, groups
        if batch < len(ordered) and (ordered[batch - 1].key_rules_1_to_5
                                     == ordered[batch].key_rules_1_to_5):
            key = ordered[batch].key_rules_1_to_5
            tied = [i for i, p in enumerate(ordered) if p.key_rules_1_to_5 == key]
            start, end = tied[0], tied[-1] + 1
            ordered[start:end] = sorted(ordered[start:end], key=cmp_to_key(
                lambda a, b: compare_pods(a, b, now)))
            groups.append(([p.name for p in ordered[start:end]], batch - start))
        victims += ordered[:batch]
        remaining = ordered[batch:]
        diff -= batch
        if diff <= 0:
            return victims, victims + remaining, groups
        for gone in ordered[:batch]:
            if gone.name in counted:
                per_node[gone.node_name] -= 1
        for pod in remaining:
            pod.rank = per_node[pod.node_name]


def is_active(pod: dict[str, Any]) -> bool:
    return (pod["status"].get("phase") not in ("Succeeded", "Failed")
            and not pod["metadata"].get("deletionTimestamp"))


# --- random states with shared ready instants -------------------------------------------


@st.composite
def states(draw: Any) -> tuple[list[dict], list[dict], int, int | None, int]:
    seconds = draw(st.lists(st.integers(-5, 40 * 86_400), min_size=1, max_size=6))
    times = [NOW - s * 10**9 for s in seconds]
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 6)))]
    # UIDs: as the API server makes them, short, shared, beyond what a key encodes
    # directly (40 bytes) or, mixed, some of each: then every key uses order indexes.
    uid_kinds = draw(st.sampled_from([["uuid"], ["short"], ["long"], ["shared"],
                                      ["uuid", "uuid", "uuid", "long"]]))
    pods = []
    for index in range(draw(st.integers(1, 60))):
        uid_kind = draw(st.sampled_from(uid_kinds))
        ready_time = draw(st.sampled_from([*times, None]))
        created = draw(st.sampled_from([ready_time, *times, None]))
        uid = {"uuid": f"{draw(st.uuids())}", "short": f"u{draw(st.integers(0, 10**6))}",
               "long": "x" * draw(st.sampled_from([1, 39, 41, 60])) + str(index),
               "shared": f"u{draw(st.integers(0, 4))}"}[uid_kind]
        pods.append(f.pod(
            f"p{index}", node_name=draw(st.sampled_from([*nodes, None])),
            phase=draw(st.sampled_from(["Running"] * 6 + ["Pending", "Failed"])),
            ready=draw(st.booleans()) or draw(st.booleans()),
            ready_time=format_time_ns(ready_time) if ready_time is not None else None,
            created=format_time_ns(created) if created is not None else None,
            cost=draw(st.sampled_from([None, None, "5", "-5"])),
            restarts=draw(st.sampled_from([0, 0, 1, 2])), uid=uid))
    related = pods + [f.pod(f"other{i}", node_name=draw(st.sampled_from(nodes)))
                      for i in range(draw(st.integers(0, 8)))]
    replicas = draw(st.integers(0, len(pods)))
    return pods, related, replicas, draw(st.sampled_from([NOW, NOW, None])), draw(
        st.integers(1, 12))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states())
def test_fast_path_gives_the_order_of_sorting_everything(state: tuple) -> None:
    pods, related, replicas, now, burst = state
    fast = predict_deletions(pods, related, replicas, now, burst)
    victims, order, groups = reference(pods, related, replicas, now, burst)
    assert [p.name for p in fast.victims] == [p.name for p in victims]
    assert [p.name for p in fast.order] == [p.name for p in order]
    assert [p.rank for p in fast.order] == [p.rank for p in order]
    assert [([p.name for p in g.members], g.removed) for g in fast.sync_tie_groups] == groups


def test_reference_follows_the_comparator_where_it_is_not_a_weak_order() -> None:
    """Not vacuous: here the key order and the comparator's disagree, and the comparator
    decides. a and b became ready at the same instant, a restarted more (rule 7 puts it
    first), so the key has the class at a's UID: a, b, then c, ready at another instant
    of the same bucket. The comparator puts c (UID 2) before b (UID 3), and the sort,
    given a, b, c, inserts c between them: the second victim is c, not b."""
    t1, t2 = format_time_ns(NOW - 100 * 10**9), format_time_ns(NOW - 101 * 10**9)
    pods = [f.pod("a", ready_time=t1, uid="1", restarts=5),
            f.pod("b", ready_time=t1, uid="3", restarts=0),
            f.pod("c", ready_time=t2, uid="2")]
    assert [p.name for p in sort_by_key([ranked_pod(p, 3) for p in pods], NOW)] == [
        "a", "b", "c"]
    victims, _, groups = reference(pods, pods, 1, NOW, 500)
    assert [p.name for p in victims] == ["a", "c"]
    assert groups == [(["a", "c", "b"], 2)]
    fast = predict_deletions(pods, pods, 1, NOW)
    assert [p.name for p in fast.victims] == ["a", "c"]


def test_a_uid_too_long_to_encode_elsewhere_in_the_set_changes_nothing() -> None:
    """A pod with a UID over 40 bytes makes every key use UID order indexes; the tie
    group at the cut (two pods ready at one instant, in UID order by restarts too, and
    a third of the same bucket after both by UID) keeps the comparator's order. Found by
    a differential run: a shortcut mixing the two UID encodings put the third first."""
    def ago(seconds: int) -> str:
        return format_time_ns(NOW - seconds * 10**9)

    pods = [f.pod("pending", phase="Pending", uid="x" * 50),
            f.pod("a", ready_time=ago(226), created=None, restarts=2, uid="5eb09c47"),
            f.pod("b", ready_time=ago(226), created=ago(226), uid="abd0551b"),
            f.pod("c", ready_time=ago(218), created=ago(317), uid="d77b1511")]
    victims, order, groups = reference(pods, pods, 2, NOW, 500)
    assert [p.name for p in victims] == ["pending", "a"]
    assert groups == [(["a", "b", "c"], 1)]
    fast = predict_deletions(pods, pods, 2, NOW)
    assert [p.name for p in fast.order] == [p.name for p in order]
    assert [([p.name for p in g.members], g.removed) for g in fast.sync_tie_groups] == groups
