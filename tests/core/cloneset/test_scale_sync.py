"""A CloneSet's scale-in: upstream's TestScale (kruise v1.8.0,
pkg/controller/cloneset/sync/cloneset_scale_test.go), the scale-in rules by example, and the
prediction against a brute force of the controller's own choice under every list order."""

from __future__ import annotations

import random
from functools import cmp_to_key
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import cloneset_factories as cf
from tests.support import factories as f
from webhook.core.cloneset.cloneset_pod import CloneSetPod
from webhook.core.cloneset.cloneset_spec import CloneSetSpec
from webhook.core.cloneset.expectation_diffs import expectation_diffs
from webhook.core.cloneset.pod_sorter import less
from webhook.core.cloneset.prediction import predict_cloneset
from webhook.core.cloneset.scale_sync import HELD_BY_HOOK, HELD_BY_LIMIT, one_sync, scale_in
from webhook.core.model.tie_group import is_certain
from webhook.core.objects.kube import format_time_ns, parse_time_ns
from webhook.core.objects.podfacts import PodFacts
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-03-15T12:00:00Z")
TEN_SECONDS_AGO = format_time_ns(NOW - 10 * 10**9)
NODES = [f.node(n, "inference" if n.startswith("inf") else "hybrid")
         for n in ("inf-1", "inf-2", "hyb-1", "hyb-2")]


def names(pods: list[Any]) -> list[str]:
    return [p.name for p in pods]


# --- upstream's TestScale -----------------------------------------------------------------


def upstream_pods(count: int, specified: int | None = None) -> list[CloneSetPod]:
    """generatePods: `sample-i`, of the revision, Running and Ready 10 s ago, no node."""
    pods = []
    for i in range(count):
        labels = {"controller-revision-hash": "sample-b976d4544"}
        if i == specified:
            labels["apps.kruise.io/specified-delete"] = "true"
        pods.append(CloneSetPod(PodFacts({
            "metadata": {"name": f"sample-{i}", "labels": labels},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": TEN_SECONDS_AGO}]}})))
    return pods


def upstream_spec(min_ready_seconds: int = 0) -> CloneSetSpec:
    return CloneSetSpec(replicas=3, max_unavailable_value="20%",
                        min_ready_seconds=min_ready_seconds,
                        update_revision="sample-b976d4544", current_revision="sample-b976d4544")


def test_upstream_scale_held_while_pods_are_not_available() -> None:
    """minReadySeconds 9999: no pod is available, so deleteReadyLimit is 0: none goes."""
    step = one_sync(upstream_spec(9999), upstream_pods(5), NOW)
    assert step.deleted == [] and len(step.kept_ready) == 2


def test_upstream_scale_deletes_the_specified_pod_first() -> None:
    step = one_sync(upstream_spec(), upstream_pods(5, specified=0), NOW)
    assert names(step.deleted) == ["sample-0"]


def test_upstream_scale_five_to_three() -> None:
    step = one_sync(upstream_spec(), upstream_pods(5), NOW)
    assert len(step.deleted) == 2


# --- the rules, by example ------------------------------------------------------------------


def predict(cloneset: dict[str, Any], pods: list[dict[str, Any]], to: int):
    return predict_cloneset(Snapshot([*NODES, cloneset, *pods]), cloneset, to, NOW)


def test_the_cheapest_pods_go_first() -> None:
    cs = cf.cloneset(replicas=4)
    pods = [cf.clone_pod(cs, name, node, cost=cost)
            for name, node, cost in (("a", "inf-1", "1000"), ("b", "hyb-1", "-100"),
                                     ("c", "inf-2", "1000"), ("d", "hyb-2", "-100"))]
    prediction = predict(cs, pods, 2)
    assert sorted(names(prediction.victims)) == ["b", "d"]
    assert prediction.tie_groups == [] and prediction.prefix_order is not None


def test_old_revision_pods_go_first_whatever_their_cost() -> None:
    cs = cf.cloneset(replicas=4, current_revision=cf.OLD)
    pods = [cf.clone_pod(cs, "new-hybrid", "hyb-1", cost="-100"),
            cf.clone_pod(cs, "old-inference", "inf-1", cost="1000", revision=cf.OLD),
            cf.clone_pod(cs, "new-inference", "inf-2", cost="1000"),
            cf.clone_pod(cs, "old-hybrid", "hyb-2", cost="-100", revision=cf.OLD)]
    assert sorted(names(predict(cs, pods, 2).victims)) == ["old-hybrid", "old-inference"]


def test_a_partition_keeps_old_pods_and_takes_updated_ones() -> None:
    cs = cf.cloneset(replicas=4, current_revision=cf.OLD,
                     spec={"updateStrategy": {"partition": 2}})
    pods = [cf.clone_pod(cs, "old-1", "inf-1", cost="1000", revision=cf.OLD),
            cf.clone_pod(cs, "old-2", "inf-2", cost="1000", revision=cf.OLD),
            cf.clone_pod(cs, "new-1", "hyb-1", cost="-100"),
            cf.clone_pod(cs, "new-2", "inf-1", cost="1000")]
    assert names(predict(cs, pods, 3).victims) == ["new-1"]


def test_specified_pods_go_and_the_rest_of_the_scale_in_after_them() -> None:
    cs = cf.cloneset(replicas=4, spec={"scaleStrategy": {"podsToDelete": ["named"]}})
    pods = [cf.clone_pod(cs, "named", "inf-1", cost="1000"),
            cf.clone_pod(cs, "labelled", "inf-2", cost="1000", specified=True),
            cf.clone_pod(cs, "cheap", "hyb-1", cost="-100"),
            cf.clone_pod(cs, "dear", "inf-2", cost="1000")]
    prediction = predict(cs, pods, 1)
    assert names(prediction.victims) == ["named", "labelled", "cheap"]
    assert names(prediction.survivors) == ["dear"]


def test_a_crowded_node_gives_first_then_the_newest_pod() -> None:
    """Rule 5: y shares its node with the older x, so it goes before z, newer but alone."""
    cs = cf.cloneset(replicas=3)
    pods = [cf.clone_pod(cs, name, node, created=created, ready_time="2026-03-15T11:00:00Z")
            for name, node, created in (("x", "hyb-1", "2026-03-15T10:00:00Z"),
                                        ("y", "hyb-1", "2026-03-15T10:30:00Z"),
                                        ("z", "hyb-2", "2026-03-15T10:45:00Z"))]
    prediction = predict(cs, pods, 2)
    assert names(prediction.victims) == ["y"] and prediction.tie_groups == []
    assert names(prediction.order) == ["y", "z", "x"]


def test_equal_pods_across_the_cut_are_possible_victims() -> None:
    cs = cf.cloneset(replicas=3)
    pods = [cf.clone_pod(cs, name, node, cost="-100")
            for name, node in (("a", "hyb-1"), ("b", "hyb-2"), ("c", "inf-1"))]
    prediction = predict(cs, pods, 2)
    assert len(prediction.victims) == 1
    assert sorted(names(prediction.victims + prediction.possible_victims)) == ["a", "b", "c"]


def test_a_pre_delete_hook_holds_the_victim() -> None:
    hook = {"preDelete": {"finalizersHandler": ["example.com/drain"]}}
    cs = cf.cloneset(replicas=2, spec={"lifecycle": hook})
    pods = [cf.clone_pod(cs, "drained", "hyb-1", cost="-100", finalizers=["example.com/drain"]),
            cf.clone_pod(cs, "kept", "inf-1", cost="1000")]
    prediction = predict(cs, pods, 1)
    assert prediction.victims == []
    assert [(b.pod.name, b.wait.reason) for b in prediction.blocked] == [
        ("drained", HELD_BY_HOOK)]


def test_max_unavailable_spreads_the_scale_in_over_syncs() -> None:
    """Two pods Ready for 10 s under minReadySeconds 60 (not available), one for an hour:
    deleteReadyLimit = maxUnavailable (20% of 1, rounded up: 1) + (3 - 1) - 2 unavailable = 1,
    so of the two chosen (not available first) one goes; the next sync (1 + 1 - 1 = 1) takes
    the other."""
    cs = cf.cloneset(replicas=3, spec={"minReadySeconds": 60})
    pods = [cf.clone_pod(cs, name, node, cost=cost, ready_time=since)
            for name, node, cost, since in (("a", "hyb-1", "-100", TEN_SECONDS_AGO),
                                            ("b", "hyb-2", "-50", TEN_SECONDS_AGO),
                                            ("c", "inf-1", "1000", "2026-03-15T11:00:00Z"))]
    spec = CloneSetSpec.of(cs).scaled_to(1)
    first = one_sync(spec, [CloneSetPod(PodFacts(p)) for p in pods], NOW)
    assert names(first.deleted) == ["a"] and names(first.kept_ready) == ["b"]
    prediction = predict(cs, pods, 1)
    assert names(prediction.victims) == ["a", "b"]
    assert prediction.blocked == [] and names(prediction.survivors) == ["c"]


def test_nothing_goes_while_no_pod_is_available() -> None:
    """Every pod unavailable: deleteReadyLimit is 0 for any target, every ready victim waits."""
    cs = cf.cloneset(replicas=3, spec={"minReadySeconds": 60})
    pods = [cf.clone_pod(cs, name, "hyb-1", ready_time=TEN_SECONDS_AGO) for name in "abc"]
    prediction = predict(cs, pods, 1)
    assert prediction.victims == [] and len(prediction.blocked) == 2


def test_pods_of_another_owner_or_finished_are_not_counted() -> None:
    cs = cf.cloneset(replicas=2)
    other = cf.cloneset("other")
    pods = [cf.clone_pod(cs, "mine", "inf-1"), cf.clone_pod(cs, "done", "hyb-1", phase="Failed"),
            cf.clone_pod(other, "theirs", "hyb-2", labels={"app": "llm"})]
    prediction = predict(cs, pods, 0)
    assert names(prediction.victims) == ["mine"]


# --- against the controller's choice, every list order ---------------------------------------


def go_sorted(pods: list[CloneSetPod], rng: random.Random, ranks: dict[int, int],
              available: Any) -> list[CloneSetPod]:
    """sort.Sort with Less: any order consistent with it (a shuffle, then a stable sort)."""
    shuffled = list(pods)
    rng.shuffle(shuffled)

    def compare(a: CloneSetPod, b: CloneSetPod) -> int:
        ra, rb = ranks.get(id(a), 0), ranks.get(id(b), 0)
        return -1 if less(a, b, ra, rb, available) else (
            1 if less(b, a, rb, ra, available) else 0)
    return sorted(shuffled, key=cmp_to_key(compare))


def go_choose(pods: list[CloneSetPod], diff: int, spec: CloneSetSpec,
              rng: random.Random) -> list[CloneSetPod]:
    """choose in choosePodsToDelete, with NewSameNodeRanker, as the Go code runs it."""
    if diff >= len(pods):
        return list(pods)
    ranks: dict[int, int] = {}
    for node in {p.facts.node_name for p in pods if p.facts.node_name}:
        on_node = go_sorted([p for p in pods if p.facts.node_name == node], rng, {}, None)
        for index, pod in enumerate(on_node[:-1]):
            ranks[id(pod)] = len(on_node) - 1 - index

    def available(pod: CloneSetPod) -> bool:
        return pod.available(spec.min_ready_seconds, NOW)
    return go_sorted(pods, rng, ranks, available)[:diff]


def go_scale_in(spec: CloneSetSpec, pods: list[CloneSetPod], rng: random.Random) -> set[str]:
    """Scale syncs with nothing specified or preparing to delete, each on what the one
    before left, until one deletes nothing: the pods they delete."""
    deleted: set[str] = set()
    while True:
        step = go_sync(spec, [p for p in pods if p.name not in deleted], rng)
        if not step:
            return deleted
        deleted |= step


def go_sync(spec: CloneSetSpec, pods: list[CloneSetPod], rng: random.Random) -> set[str]:
    """One Scale sync with nothing specified or preparing to delete: the pods it deletes."""
    diffs = expectation_diffs(spec, pods, spec.current_revision, spec.update_revision, None, NOW)
    if diffs.scale_up_num > 0 or diffs.scale_down_num <= 0:
        return set()
    updated = [p for p in pods if p.of_revision(spec.update_revision)]
    old = [p for p in pods if not p.of_revision(spec.update_revision)]
    total, from_old = diffs.scale_down_num, diffs.scale_down_num_old_revision
    if from_old >= total:
        chosen = go_choose(old, total, spec, rng)
    elif from_old > 0:
        chosen = go_choose(old, from_old, spec, rng) + go_choose(updated, total - from_old,
                                                                 spec, rng)
    else:
        chosen = go_choose(updated, total, spec, rng)
    limit, deleted = diffs.delete_ready_limit, set()
    for pod in chosen:
        if not pod.ready():
            deleted.add(pod.name)
        elif limit > 0:
            deleted.add(pod.name)
            limit -= 1
    return deleted


NODE_NAMES = [None, "inf-1", "hyb-1", "hyb-1", "hyb-2"]  # crowded nodes: ranks matter
STAMPS = [None, "2026-03-15T11:59:00Z", "2026-03-15T11:00:00Z"]


@st.composite
def states(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    count = draw(st.integers(1, 10))
    partition = draw(st.sampled_from([None, 0, 1, 2, "50%"]))
    spec: dict[str, Any] = {"minReadySeconds": draw(st.sampled_from([0, 0, 120]))}
    if partition is not None:
        spec["updateStrategy"] = {"partition": partition}
    cs = cf.cloneset(replicas=count, current_revision=cf.OLD, spec=spec)
    pods = []
    for i in range(count):
        ready = draw(st.sampled_from([True, True, False]))
        pods.append(cf.clone_pod(
            cs, f"p{i}", draw(st.sampled_from(NODE_NAMES)),
            revision=draw(st.sampled_from([cf.NEW, cf.OLD])),
            phase=draw(st.sampled_from(["Running"] * 4 + ["Pending", "Unknown"])),
            ready=ready, ready_time=draw(st.sampled_from(STAMPS)),
            created=draw(st.sampled_from(STAMPS)), restarts=draw(st.integers(0, 1)),
            cost=draw(st.sampled_from([None, None, None, "-100", "1000"]))))
    return cs, pods, draw(st.integers(0, count))


@settings(max_examples=200, deadline=None)
@given(states(), st.integers(0, 2**32))
def test_the_controller_deletes_only_what_the_prediction_allows(state: Any, seed: int) -> None:
    """Whatever list order the controller's informer gives it, the pods its scale-in syncs
    delete are victims or possible victims, and every certain victim is among them."""
    cloneset, pods, target = state
    prediction = predict(cloneset, pods, target)
    victims = set(names(prediction.victims))
    allowed = victims | set(names(prediction.possible_victims))
    tied = {p.name for group in prediction.tie_groups for p in group.members}
    spec = CloneSetSpec.of(cloneset).scaled_to(target)
    rng = random.Random(seed)
    for _ in range(5):
        records = [CloneSetPod(PodFacts(pod)) for pod in pods if pod["status"]["phase"]
                   not in ("Succeeded", "Failed")]
        deleted = go_scale_in(spec, records, rng)
        assert deleted <= allowed, (deleted, victims, allowed)
        assert victims - tied <= deleted
        assert len(deleted) == len(victims)


def test_scale_in_stops_when_a_sync_changes_nothing() -> None:
    cs = cf.cloneset(replicas=2)
    pods = [CloneSetPod(PodFacts(cf.clone_pod(cs, f"p{i}", "inf-1"))) for i in range(2)]
    assert scale_in(CloneSetSpec.of(cs), pods, NOW).deleted == []


def test_a_victim_the_controllers_own_rules_choose_says_why() -> None:
    """Specified pods and old revisions go before any cost decides: their reason says so,
    where the ranking's rule would name the wrong one."""
    cs = cf.cloneset(replicas=4, current_revision=cf.OLD)
    pods = [cf.clone_pod(cs, "new-hybrid", "hyb-1", cost="-100"),
            cf.clone_pod(cs, "old-inference", "inf-1", cost="1000", revision=cf.OLD),
            cf.clone_pod(cs, "named", "inf-2", cost="1000", specified=True),
            cf.clone_pod(cs, "old-hybrid", "hyb-2", cost="-100", revision=cf.OLD)]
    reasons = predict(cs, pods, 3).reasons
    assert reasons == {"named": "labelled apps.kruise.io/specified-delete"}
    pods[2] = cf.clone_pod(cs, "new-inference", "inf-2", cost="1000")
    reasons = predict(cs, pods, 2).reasons
    assert set(reasons) == {"old-inference", "old-hybrid"}
    assert all(r.startswith("of an old revision") for r in reasons.values())


# --- specified pods: below the count, and competing for the ready limit ---------------------
# From cloneset_scale.go `Scale`: pods to create come before any deletion (step 3, at most
# scaleUpLimit of them: scaleStrategy.maxUnavailable less the unavailable pods); specified
# pods (step 5) are taken in the controller's list order, the ready ones while
# deleteReadyLimit lasts.

AN_HOUR_AGO = "2026-03-15T11:00:00Z"


def test_a_specified_pod_below_the_count_waits_for_the_creation_held_back() -> None:
    """4 replicas, 3 pods, one of them unavailable (Ready 10 s under minReadySeconds 60):
    scaleUpLimit = scaleStrategy.maxUnavailable 1 - 1 unavailable = 0, so the sync creates
    nothing and deletes nothing; `named` goes once `pending` is available and the missing
    pod is created: blocked, waiting on `pending`, never a survivor."""
    cs = cf.cloneset(replicas=5, spec={"minReadySeconds": 60, "scaleStrategy": {
        "podsToDelete": ["named"], "maxUnavailable": 1}})
    # `named` is not available either, but a specified pod is not counted as unavailable
    pods = [cf.clone_pod(cs, "named", "inf-1", ready_time=TEN_SECONDS_AGO),
            cf.clone_pod(cs, "other", "hyb-1", ready_time=AN_HOUR_AGO),
            cf.clone_pod(cs, "pending", "hyb-2", ready_time=TEN_SECONDS_AGO)]
    prediction = predict(cs, pods, 4)
    assert prediction.victims == [] and names(prediction.survivors) == ["pending", "other"]
    (blocked,) = prediction.blocked
    assert (blocked.pod.name, blocked.waiting_on) == ("named", "pending")
    assert blocked.wait.reason == (
        "the CloneSet creates 1 pod before it deletes a specified one, and "
        "scaleStrategy.maxUnavailable (1) holds the creation back while 1 of its pods is "
        "unavailable")


def test_a_specified_pod_below_the_count_goes_after_the_creation_it_waits_for() -> None:
    """The same without scaleStrategy.maxUnavailable: the sync creates the missing pod
    (Pending), the next deletes `named` (deleteReadyLimit = 20% of 4, rounded up, + 0 - 1
    unavailable created pod = 0 for a ready pod: it waits for the new pod to be available;
    a pod that is not ready goes at once)."""
    cs = cf.cloneset(replicas=5, spec={"scaleStrategy": {"podsToDelete": ["named", "broken"]}})
    pods = [cf.clone_pod(cs, "named", "inf-1", ready_time=AN_HOUR_AGO),
            cf.clone_pod(cs, "broken", "inf-2", ready=False, ready_time=None),
            cf.clone_pod(cs, "other", "hyb-1", ready_time=AN_HOUR_AGO)]
    prediction = predict(cs, pods, 4)
    assert names(prediction.victims) == ["broken"]
    assert [(b.pod.name, b.wait.reason) for b in prediction.blocked] == [
        ("named", HELD_BY_LIMIT)]
    assert names(prediction.survivors) == ["other"]
    assert any("creates 2 pods on the way" in note for note in prediction.notes)


def test_ready_specified_pods_competing_for_one_slot_are_tied() -> None:
    """5 -> 4 with `a` and `b` named, ready and available, `e` not yet available:
    deleteReadyLimit = 1 + (5 - 4) - 1 = 1, so the first of a, b in the controller's list
    goes and the other waits for `e`: one victim, uncertain, the other blocked and a
    possible victim of this sync."""
    cs = cf.cloneset(replicas=5, spec={"minReadySeconds": 60,
                                       "scaleStrategy": {"podsToDelete": ["a", "b"]}})
    pods = [cf.clone_pod(cs, "a", "inf-1", ready_time=AN_HOUR_AGO),
            cf.clone_pod(cs, "b", "inf-2", ready_time=AN_HOUR_AGO),
            cf.clone_pod(cs, "c", "hyb-1", ready_time=AN_HOUR_AGO),
            cf.clone_pod(cs, "d", "hyb-1", ready_time=AN_HOUR_AGO),
            cf.clone_pod(cs, "e", "hyb-2", ready_time=TEN_SECONDS_AGO)]
    prediction = predict(cs, pods, 4)
    assert len(prediction.victims) == 1 and len(prediction.blocked) == 1
    going = {prediction.victims[0].name, prediction.blocked[0].pod.name}
    assert going == {"a", "b"}
    (tie,) = prediction.tie_groups
    assert sorted(p.name for p in tie.members) == ["a", "b"] and tie.removed == 1
    assert not is_certain(prediction.victims[0], prediction.tie_groups)
    assert names(prediction.possible_victims) == [prediction.blocked[0].pod.name]


def go_specified_sync(spec: CloneSetSpec, pods: list[CloneSetPod], rng: random.Random,
                      created: int) -> tuple[set[str], list[CloneSetPod]]:
    """One Scale sync, steps 3, 5 and 6 (no lifecycle hooks), the pods in a random list
    order: (the names it deletes, the pods it creates: Pending, PreparingNormal)."""
    diffs = expectation_diffs(spec, pods, spec.current_revision, spec.update_revision, None, NOW)
    if diffs.scale_up_num > 0:
        new = []
        for i in range(diffs.scale_up_limit):
            revision = (spec.current_revision if i < diffs.scale_up_num_old_revision
                        else spec.update_revision)
            new.append(CloneSetPod(PodFacts(cf.clone_pod(
                cf.cloneset(), f"new-{created + i}", None, revision=revision, phase="Pending",
                ready=False, ready_time=None, state="PreparingNormal"))))
        return set(), new
    listed = list(pods)
    rng.shuffle(listed)
    specified = [p for p in listed if p.name in spec.pods_to_delete or p.specified_delete]
    if specified:
        limit, deleted = diffs.delete_ready_limit, set()
        for pod in specified:
            if not pod.ready():
                deleted.add(pod.name)
            elif limit > 0:
                deleted.add(pod.name)
                limit -= 1
        return deleted, []
    return go_sync(spec, pods, rng), []


def go_stalled(spec: CloneSetSpec, pods: list[CloneSetPod], rng: random.Random) -> set[str]:
    """Syncs until one changes nothing, the created pods staying Pending: the pods of
    `pods` deleted."""
    remaining, deleted, created = list(pods), set(), 0
    for _ in range(100):
        gone, new = go_specified_sync(spec, remaining, rng, created)
        if not gone and not new:
            return deleted & {p.name for p in pods}
        deleted |= gone
        created += len(new)
        remaining = [p for p in remaining if p.name not in gone] + new
    raise AssertionError("the syncs never settled")


@st.composite
def specified_states(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    count = draw(st.integers(1, 7))
    spec: dict[str, Any] = {"minReadySeconds": draw(st.sampled_from([0, 120]))}
    named = draw(st.lists(st.sampled_from([f"p{i}" for i in range(count)]), max_size=3,
                          unique=True))
    scale: dict[str, Any] = {"podsToDelete": named}
    scale_max = draw(st.sampled_from([None, 0, 1, 2, "50%"]))
    if scale_max is not None:
        scale["maxUnavailable"] = scale_max
    spec["scaleStrategy"] = scale
    update = {"maxUnavailable": draw(st.sampled_from([0, 1, 2, "20%"])),
              "maxSurge": draw(st.sampled_from([0, 0, 1, "50%"]))}
    if update["maxUnavailable"] == 0 and update["maxSurge"] == 0:
        update["maxUnavailable"] = 1  # the CloneSet webhook refuses both 0
    spec["updateStrategy"] = update
    cs = cf.cloneset(replicas=count + 2, spec=spec)
    pods = [cf.clone_pod(cs, f"p{i}", draw(st.sampled_from(NODE_NAMES)),
                         phase=draw(st.sampled_from(["Running"] * 4 + ["Pending"])),
                         ready=draw(st.sampled_from([True, True, False])),
                         ready_time=draw(st.sampled_from(STAMPS)),
                         specified=draw(st.sampled_from([False] * 5 + [True])),
                         cost=draw(st.sampled_from([None, "-100", "1000"])))
            for i in range(count)]
    return cs, pods, draw(st.integers(0, count + 2))


@settings(max_examples=300, deadline=None)
@given(specified_states(), st.integers(0, 2**32))
def test_specified_pods_go_as_the_controller_deletes_them_in_any_list_order(
        state: Any, seed: int) -> None:
    """Below the count, at it or above, with pods specified to delete: whatever the list
    order, the syncs (created pods left Pending: the state a scale-down stalls in) delete
    only victims and possible victims, every certain victim, and no blocked pod."""
    cloneset, pods, target = state
    prediction = predict(cloneset, pods, target)
    victims = set(names(prediction.victims))
    allowed = victims | set(names(prediction.possible_victims))
    blocked = {b.pod.name for b in prediction.blocked}
    certain = {p.name for p in prediction.victims if is_certain(p, prediction.tie_groups)}
    spec = CloneSetSpec.of(cloneset).scaled_to(target)
    rng = random.Random(seed)
    for _ in range(5):
        records = [CloneSetPod(PodFacts(pod)) for pod in pods]
        deleted = go_stalled(spec, records, rng)
        assert deleted <= allowed, (deleted, victims, allowed)
        assert certain <= deleted, (certain, deleted)
        assert not deleted & (blocked - allowed), (deleted, blocked)


def test_the_end_state_loses_every_tied_specified_pod() -> None:
    """a and b (inference) named, one deleteReadyLimit slot: one goes now, the other once
    `e` is available. minProtectedReplicas 2 holds while one waits (b or a and c remain)
    and breaks once both are gone: the verdict judges that end state."""
    policy = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000,
                                      "protected": True},
                                     {"name": "hybrid", "deletionCost": -100}],
                           "scaleDown": {"protectedLast": False, "minProtectedReplicas": 2}})
    cs = cf.cloneset(replicas=5, spec={"minReadySeconds": 60,
                                       "scaleStrategy": {"podsToDelete": ["a", "b"]}})
    pods = [cf.clone_pod(cs, "a", "inf-1", ready_time=AN_HOUR_AGO),
            cf.clone_pod(cs, "b", "inf-2", ready_time=AN_HOUR_AGO),
            cf.clone_pod(cs, "c", "inf-1", ready_time=AN_HOUR_AGO),
            cf.clone_pod(cs, "d", "hyb-1", ready_time=AN_HOUR_AGO),
            cf.clone_pod(cs, "e", "hyb-2", ready_time=TEN_SECONDS_AGO)]
    verdict = assess_scale(Snapshot([*NODES, cs, *pods]), policy, cs, 4, NOW).verdict
    (violation,) = verdict.violations
    assert violation.rule == "minProtectedReplicas" and not verdict.allowed
    assert violation.message.startswith("leaves 1 pod on protected pools")
def test_a_pod_alone_on_its_node_is_not_tied_with_a_crowded_nodes_ranks() -> None:
    """Four equal pods, three on hyb-1: the ranker gives those 2, 1 and 0 in some order,
    so one of them (rank 2) goes first; z, alone on hyb-2, keeps rank 0 and cannot go,
    though it ties with whichever hyb-1 pod gets rank 0."""
    cs = cf.cloneset(replicas=4)
    pods = [cf.clone_pod(cs, name, node)
            for name, node in (("a", "hyb-1"), ("b", "hyb-1"), ("c", "hyb-1"), ("z", "hyb-2"))]
    prediction = predict(cs, pods, 3)
    assert len(prediction.victims) == 1
    assert sorted(names(prediction.victims + prediction.possible_victims)) == ["a", "b", "c"]
    assert [sorted(names(group.members)) for group in prediction.tie_groups] == [["a", "b", "c"]]
