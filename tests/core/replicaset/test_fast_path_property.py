"""The fast victim prediction agrees with a plain reading of `ActivePodsWithRanks`.

`predict_deletions` works on integer keys, a heap and lazy re-ranking. The reference
below does what the design text says, literally: at every sync, rank every active pod
by its active related pods on the same node, sort everything with the comparator
(ActivePodsWithRanks.Less, written out again here from the design), cut at the batch,
and report the pods tied with the cut on rules 1-5. Which members of such a tie group
go is not knowable (the design says so), so the reference takes the fast path's choice
there after checking it is a legal one, and both go on from the same state.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import cmp_to_key
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.core.model.tie_group import is_certain
from webhook.core.replicaset.replicaset_sync import Deletion, predict_deletions

COST = "controller.kubernetes.io/pod-deletion-cost"
NOW = 1_800_000_000 * 10**9
PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}
INT32 = (-(2**31), 2**31 - 1)

# --- the reference, from `ActivePodsWithRanks.Less` ----------------------------------------


def active(pod: dict[str, Any]) -> bool:
    return (pod["status"].get("phase") not in ("Succeeded", "Failed")
            and not pod["metadata"].get("deletionTimestamp"))


def cost(pod: dict[str, Any]) -> int:
    """strconv.ParseInt(v, 10, 32) behind validFirstDigit; invalid or absent is 0."""
    value = (pod["metadata"].get("annotations") or {}).get(COST)
    if value is None or not value:
        return 0
    if not (value[0] == "-" or value == "0" or value[0] in "123456789"):
        return 0
    digits = value[1:] if value[0] == "-" else value
    if not digits or not all(c in "0123456789" for c in digits):
        return 0
    number = int(value)
    return number if INT32[0] <= number <= INT32[1] else 0


def ready_since(pod: dict[str, Any]) -> tuple[bool, int | None]:
    for condition in pod["status"].get("conditions") or []:
        if condition["type"] == "Ready":
            if condition["status"] != "True":
                return False, None
            return True, condition.get("t")
    return False, None


def restarts(pod: dict[str, Any]) -> tuple[int, int]:
    regular = max([c["restartCount"] for c in pod["status"].get("containerStatuses") or []],
                  default=0)
    sidecars = {c["name"] for c in pod["spec"].get("initContainers") or []
                if c.get("restartPolicy") == "Always"}
    sidecar = max([c["restartCount"] for c in pod["status"].get("initContainerStatuses") or []
                   if c["name"] in sidecars], default=0)
    return regular, sidecar


def rules_1_to_5(pod: dict[str, Any], rank: int) -> tuple[Any, ...]:
    ready, _ = ready_since(pod)
    return (bool(pod["spec"].get("nodeName")), PHASE_ORDER.get(pod["status"]["phase"], 0),
            ready, cost(pod), -rank)


def bucket(t: int, now: int) -> int:
    age = now - t
    if age <= 0:
        return -1
    fraction, exponent = math.frexp(float(age))
    log2 = float(exponent - 1) if fraction == 0.5 else math.log(fraction) / math.log(2) + exponent
    return int(log2)


def less_time(ti: int | None, tj: int | None, now: int | None, uid_i: str, uid_j: str) -> bool:
    """Rules 6/8 for different times: zero first, else log buckets, equal bucket -> UID."""
    if ti is None or tj is None or now is None:
        return ti is None if (ti is None or tj is None) else ti > tj
    bi, bj = bucket(ti, now), bucket(tj, now)
    return uid_i < uid_j if bi == bj else bi < bj


def less(a: tuple[dict, int], b: tuple[dict, int], now: int | None) -> bool:
    (pa, ra), (pb, rb) = a, b
    ka, kb = rules_1_to_5(pa, ra), rules_1_to_5(pb, rb)
    if ka != kb:
        return ka < kb
    (ready_a, ta), (ready_b, tb) = ready_since(pa), ready_since(pb)
    if ready_a and ready_b and ta != tb:
        return less_time(ta, tb, now, pa["metadata"]["uid"], pb["metadata"]["uid"])
    if restarts(pa) != restarts(pb):
        return restarts(pa) > restarts(pb)  # regular first, then sidecars
    ca, cb = pa["metadata"].get("c"), pb["metadata"].get("c")
    if ca != cb:
        return less_time(ca, cb, now, pa["metadata"]["uid"], pb["metadata"]["uid"])
    return False


def check_against_reference(fast: Deletion, pods: list[dict], related: list[dict],
                            replicas: int, now: int | None, burst: int) -> None:
    """Assert that `fast`, a prediction for these arguments, is what §2.2 allows."""
    by_name = {p["metadata"]["name"]: p for p in pods}
    remaining = [p for p in pods if active(p)]
    per_node = Counter(p["spec"].get("nodeName") or "" for p in related if active(p))
    counted = {p["metadata"]["name"] for p in related if active(p)}
    diff = len(remaining) - replicas
    taken_so_far, groups_seen = 0, 0
    while diff > 0:
        batch = min(diff, burst)
        ranked = [(p, per_node[p["spec"].get("nodeName") or ""]) for p in remaining]
        ordered = sorted(ranked, key=cmp_to_key(
            lambda a, b: -1 if less(a, b, now) else (1 if less(b, a, now) else 0)))
        keys = [rules_1_to_5(p, r) for p, r in ordered]
        cut_key = keys[batch - 1]
        certain = {p["metadata"]["name"] for (p, _), k in zip(ordered, keys, strict=True)
                   if k < cut_key}
        tied = {p["metadata"]["name"] for (p, _), k in zip(ordered, keys, strict=True)
                if k == cut_key}
        chosen = {p.name for p in fast.victims[taken_so_far:taken_so_far + batch]}
        assert len(chosen) == batch
        assert certain <= chosen, "a pod that rules 1-5 put before the cut survived"
        assert chosen - certain <= tied, "a victim from beyond the tie group"
        if batch < len(ordered) and keys[batch] == cut_key:
            group = fast.sync_tie_groups[groups_seen]
            groups_seen += 1
            assert {p.name for p in group.members} == tied
            assert group.removed == batch - len(certain)
        else:
            assert chosen == certain | tied
        if taken_so_far == 0 and diff <= burst:  # one sync: certain when rules 1-5 decide
            split = batch < len(ordered) and keys[batch] == cut_key
            for victim in fast.victims:
                assert is_certain(victim, fast.tie_groups) == (
                    victim.name in certain or not split), victim.name
        # Go on from the fast path's choice (legal, as checked above).
        for name in chosen:
            if name in counted:
                per_node[by_name[name]["spec"].get("nodeName") or ""] -= 1
        remaining = [p for p in remaining if p["metadata"]["name"] not in chosen]
        taken_so_far += batch
        diff -= batch
    assert taken_so_far == len(fast.victims)
    assert groups_seen == len(fast.sync_tie_groups)
    # The survivors are in rules 1-5 order with the ranks of the last sync.
    survivors = fast.order[len(fast.victims):]
    assert sorted(p.name for p in survivors) == sorted(p["metadata"]["name"] for p in remaining)
    survivor_keys = [(bool(p.node_name), p.phase_ordinal, p.ready, p.deletion_cost, -p.rank)
                     for p in survivors]
    assert survivor_keys == sorted(survivor_keys)


# --- random states ---------------------------------------------------------------------

TIMES = [NOW - 10**9 * s for s in (0, 1, 30, 3600, 3601, 7200, 86_400 * 9)] + [NOW + 10**9]
COSTS = [None, "0", "5", "-5", "100", "-2147483648", "2147483647", "007", "+1", "x", "",
         "2147483648"]


def rfc3339(t: int) -> str:
    from webhook.core.objects.kube import format_time_ns

    return format_time_ns(t)


@st.composite
def pod_states(draw: Any) -> tuple[list[dict], list[dict], int, int | None, int]:
    nodes = ["", "n1", "n2", "n3", "n4"]
    replica_sets = draw(st.integers(1, 3))
    shared_uids = draw(st.booleans())
    pods = []
    for index in range(draw(st.integers(1, 24))):
        rs = draw(st.integers(0, replica_sets - 1))
        phase = draw(st.sampled_from(["Running"] * 4 + ["Pending", "Unknown", "Succeeded",
                                                        "Failed", "Weird"]))
        ready = draw(st.booleans())
        # Whole seconds, as the API server stores times (RFC 3339 without fractions).
        t_ready = draw(st.sampled_from([*TIMES, None]))
        t_created = draw(st.sampled_from([*TIMES, None]))
        uid = f"u{draw(st.integers(0, 5))}" if shared_uids else f"uid-{draw(st.uuids())}"
        condition: dict[str, Any] = {"type": "Ready", "status": "True" if ready else "False"}
        if t_ready is not None:
            condition["lastTransitionTime"] = rfc3339(t_ready)
            condition["t"] = t_ready  # for the reference
        metadata: dict[str, Any] = {"name": f"p{index}", "namespace": "ml", "uid": uid}
        if t_created is not None:
            metadata["creationTimestamp"] = rfc3339(t_created)
            metadata["c"] = t_created
        value = draw(st.sampled_from(COSTS))
        if value is not None:
            metadata["annotations"] = {COST: value}
        if draw(st.integers(0, 9)) == 0:
            metadata["deletionTimestamp"] = rfc3339(NOW)  # terminating
        spec: dict[str, Any] = {"containers": [{"name": "main"}]}
        node = draw(st.sampled_from(nodes))
        if node:
            spec["nodeName"] = node
        status: dict[str, Any] = {
            "phase": phase, "conditions": [condition],
            "containerStatuses": [{"name": "main", "restartCount": draw(st.integers(0, 2))}]}
        if draw(st.booleans()):
            spec["initContainers"] = [
                {"name": "proxy", "restartPolicy": "Always"}, {"name": "init"}]
            status["initContainerStatuses"] = [
                {"name": "proxy", "restartCount": draw(st.integers(0, 2))},
                {"name": "init", "restartCount": draw(st.integers(0, 9))}]
        pods.append({"metadata": metadata, "spec": spec, "status": status, "rs": rs})
    target = draw(st.integers(0, replica_sets - 1))
    own = [p for p in pods if p["rs"] == target]
    related = pods if draw(st.booleans()) else []  # a ReplicaSet without a controller
    replicas = draw(st.integers(0, max(len(own), 1)))
    now = draw(st.sampled_from([NOW, None]))
    burst = draw(st.integers(1, 6))
    return own, related, replicas, now, burst


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod_states())
def test_fast_path_agrees_with_the_reference(state: tuple) -> None:
    own, related, replicas, now, burst = state
    fast = predict_deletions(own, related, replicas, now, burst)
    check_against_reference(fast, own, related, replicas, now, burst)


def test_reference_rejects_a_wrong_victim() -> None:
    """The check is not vacuous: a prediction that keeps the cheaper pod fails it."""
    pods = [{"metadata": {"name": name, "namespace": "ml", "uid": name,
                          "annotations": {COST: value}},
             "spec": {"nodeName": "n1"},
             "status": {"phase": "Running", "conditions": [
                 {"type": "Ready", "status": "True"}]}}
            for name, value in (("cheap", "-5"), ("dear", "5"))]
    right = predict_deletions(pods, pods, 1, NOW)
    check_against_reference(right, pods, pods, 1, NOW, 500)
    wrong = Deletion(order=right.order[::-1], victims=[right.order[1]])
    try:
        check_against_reference(wrong, pods, pods, 1, NOW, 500)
    except AssertionError:
        return
    raise AssertionError("the reference accepted a wrong victim")
