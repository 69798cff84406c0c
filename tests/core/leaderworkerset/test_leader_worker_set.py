"""LeaderWorkerSet scale-downs: whole groups go, highest group index first.

Upstream source (sigs.k8s.io/lws v0.10.0; the same in v0.9.0, which the e2e tier builds and
verifies against): pkg/controllers/leaderworkerset_controller.go (the leader StatefulSet
`<lws>`, Parallel; `rollingUpdateParameters` and `calculateRollingUpdateReplicas`: the surge
groups kept while groups in the new range are not ready), pkg/controllers/pod_controller.go
(worker StatefulSet `<lws>-<g>` owned by the leader pod, ordinals from 1);
`rollingUpdatePartition`: a rolling update goes on after a scale-down and may recreate the
outdated groups that stay.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import factories as f
from tests.support import lws_factories as lf
from webhook.core.cost.mutation import SKIP_LABEL
from webhook.core.leaderworkerset.leader_worker_set import rolling_update_replicas
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.clamp import clamp_scale_down
from webhook.core.scale.predict import predict_scale
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.scale.scope import out_of_scope_reason
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-03-15T12:00:00Z")
POLICY = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                                 {"name": "hybrid", "deletionCost": -100}]})
NODES = [f.node("inf-1", "inference"), f.node("inf-2", "inference"),
         f.node("hyb-1", "hybrid"), f.node("hyb-2", "hybrid")]
INF, HYB = "inf-1", "hyb-1"


def view_of(objects: list[dict[str, Any]]) -> Snapshot:
    return Snapshot([*NODES, *objects])


def names(pods: list[Any]) -> list[str]:
    return [p.name for p in pods]


def test_the_highest_groups_go_whole_leader_and_workers():
    lws, objects = lf.lws_state([[INF, INF], [HYB, HYB], [HYB, INF], [HYB, HYB]])
    prediction = predict_scale(view_of(objects), lws, 2, NOW)
    assert names(prediction.victims) == ["llm-3", "llm-3-1", "llm-2", "llm-2-1"]
    assert names(prediction.survivors) == ["llm-1", "llm-1-1", "llm-0", "llm-0-1"]
    assert names(prediction.order) == names(prediction.victims + prediction.survivors)
    assert not prediction.blocked and not prediction.tie_groups
    assert [(g.index, g.fate) for g in prediction.units] == [
        (3, "victim"), (2, "victim"), (1, "survives"), (0, "survives")]
    assert prediction.units[1].leader.name == "llm-2"
    assert names(prediction.units[1].workers) == ["llm-2-1"]


def test_workers_are_ordered_by_worker_index_and_size_one_has_no_workers():
    lws, objects = lf.lws_state([[HYB] * 11, [HYB] * 11])
    prediction = predict_scale(view_of(objects), lws, 1, NOW)
    assert names(prediction.victims) == ["llm-1"] + [f"llm-1-{w}" for w in range(1, 11)]
    lws, objects = lf.lws_state([[HYB], [HYB], [INF]])
    prediction = predict_scale(view_of(objects), lws, 1, NOW)
    assert names(prediction.victims) == ["llm-2", "llm-1"]
    assert all(g.workers == [] for g in prediction.units)


def test_pods_of_another_leader_worker_set_or_without_a_statefulset_are_not_members():
    lws, objects = lf.lws_state([[HYB, HYB], [HYB, HYB]])
    _, other_objects = lf.lws_state([[INF, INF], [INF, INF]], name="serve")
    stray = f.pod("llm-1-2", node_name=INF, labels={lf.SET_NAME_LABEL: "llm"})  # no owner
    prediction = predict_scale(view_of([*objects, *other_objects, stray]), lws, 1, NOW)
    assert names(prediction.victims) == ["llm-1", "llm-1-1"]
    assert "serve-0" not in names(prediction.survivors)


def test_an_unready_group_in_the_new_range_does_not_stop_the_scale_down_without_surge():
    # Leader StatefulSet is Parallel: no OrderedReady stall; maxSurge 0 keeps no group.
    lws = lf.leader_worker_set("llm", replicas=3, size=2)
    sts = lf.leader_statefulset(lws)
    objects = [lws, sts, *lf.group(lws, sts, 0, [HYB, HYB], ready=False),
               *lf.group(lws, sts, 1, [HYB, HYB]), *lf.group(lws, sts, 2, [INF, INF])]
    prediction = predict_scale(view_of(objects), lws, 1, NOW)
    assert names(prediction.victims) == ["llm-2", "llm-2-1", "llm-1", "llm-1-1"]
    assert not prediction.blocked


def surge_state(ready_zero: bool, ready_one: bool, max_surge: int | str = 1
                ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lws = lf.leader_worker_set("llm", replicas=4, size=2, max_surge=max_surge)
    sts = lf.leader_statefulset(lws)
    objects = [lws, sts, *lf.group(lws, sts, 0, [HYB, HYB], ready=ready_zero),
               *lf.group(lws, sts, 1, [HYB, HYB], workers_ready=ready_one),
               *lf.group(lws, sts, 2, [INF, INF]), *lf.group(lws, sts, 3, [HYB, HYB])]
    return lws, objects


def test_the_controller_keeps_a_surge_group_while_new_groups_are_not_ready():
    # 4 -> 2 with maxSurge 1, maxUnavailable 1: groups 0 and 1 are unready (2 > maxSurge),
    # so calculateRollingUpdateReplicas keeps 2 + 1: group 2 waits, group 3 goes now.
    lws, objects = surge_state(ready_zero=False, ready_one=False)
    prediction = predict_scale(view_of(objects), lws, 2, NOW)
    assert names(prediction.victims) == ["llm-3", "llm-3-1"]
    assert [(b.pod.name, b.waiting_on) for b in prediction.blocked] == [
        ("llm-2", "llm-0"), ("llm-2-1", "llm-0")]
    assert [(g.index, g.fate) for g in prediction.units][:2] == [(3, "victim"), (2, "blocked")]
    assert any("keeps group 2 for now" in note and "llm-0, llm-1" in note
               for note in prediction.notes)


def test_one_unready_group_within_max_unavailable_keeps_no_surge():
    lws, objects = surge_state(ready_zero=False, ready_one=True)
    prediction = predict_scale(view_of(objects), lws, 2, NOW)
    assert names(prediction.victims) == ["llm-3", "llm-3-1", "llm-2", "llm-2-1"]
    assert not prediction.blocked


def test_a_worker_statefulset_not_ready_makes_its_group_unready():
    lws, objects = surge_state(ready_zero=False, ready_one=False, max_surge="50%")
    # maxSurge 50% of the new 2 groups, rounded up: 1 (as with maxSurge 1)
    prediction = predict_scale(view_of(objects), lws, 2, NOW)
    assert names(prediction.blocked and [b.pod for b in prediction.blocked]) == [
        "llm-2", "llm-2-1"]


@pytest.mark.parametrize(("replicas", "surge", "unavailable", "unready", "expected"), [
    # TestCalculateRollingUpdateReplicas in leaderworkerset_controller_test.go
    (1, 1, 0, 1, 2), (4, 2, 1, 2, 5), (2, 2, 1, 2, 3), (1, 1, 0, 0, 1), (1, 1, 1, 1, 1),
    (3, 0, 0, 1, 3),
])
def test_rolling_update_replicas_as_upstream_tests_it(replicas, surge, unavailable, unready,
                                                      expected):
    assert rolling_update_replicas(replicas, surge, unavailable, unready) == expected


def test_a_scale_down_during_a_rolling_update_keeps_the_surge_over_old_groups():
    # LWS 3 groups, surge 1 during an update: the leader StatefulSet holds 4 groups,
    # groups 0 and 1 still of the old revision. To 2: both are not updated (2 > maxSurge),
    # so the controller keeps 2 + 1 groups: group 3 goes, group 2 waits.
    lws = lf.leader_worker_set("llm", replicas=3, size=2, max_surge=1)
    sts = lf.leader_statefulset(lws, replicas=4, partition=2)
    objects = [lws, sts, *lf.group(lws, sts, 0, [HYB, HYB], revision="old"),
               *lf.group(lws, sts, 1, [HYB, HYB], revision="old"),
               *lf.group(lws, sts, 2, [INF, INF]), *lf.group(lws, sts, 3, [HYB, HYB])]
    prediction = predict_scale(view_of(objects), lws, 2, NOW)
    assert names(prediction.victims) == ["llm-3", "llm-3-1"]
    assert names([b.pod for b in prediction.blocked]) == ["llm-2", "llm-2-1"]
    # once updated and ready, the groups above the target all go
    objects = [lws, sts, *lf.group(lws, sts, 0, [HYB, HYB]), *lf.group(lws, sts, 1, [HYB, HYB]),
               *lf.group(lws, sts, 2, [INF, INF]), *lf.group(lws, sts, 3, [HYB, HYB])]
    prediction = predict_scale(view_of(objects), lws, 2, NOW)
    assert names(prediction.victims) == ["llm-3", "llm-3-1", "llm-2", "llm-2-1"]


def rolling_state(layout: list[tuple[list[str], str, bool]], *, replicas: int,
                  sts_replicas: int, partition: int, max_surge: int = 0,
                  floor: int = 0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A LeaderWorkerSet mid-update: per group (nodes, revision, ready); the leader
    StatefulSet holds `sts_replicas` groups at `partition`, of the current revision."""
    lws = lf.leader_worker_set("llm", replicas=replicas, size=len(layout[0][0]),
                               max_surge=max_surge, partition=floor)
    sts = lf.leader_statefulset(lws, replicas=sts_replicas, partition=partition)
    objects = [lws, sts]
    for index, (nodes, revision, ready) in enumerate(layout):
        objects += lf.group(lws, sts, index, nodes, revision=revision, ready=ready)
    return lws, objects


def fates(prediction: Any) -> list[tuple[int, str]]:
    return [(g.index, g.fate) for g in prediction.units]


def test_outdated_groups_below_the_new_count_are_possible_victims_of_the_update():
    # Mid-update without surge (partition 1, both groups of the old revision), 2 -> 1:
    # the controller sets the new count, then lowers the partition and recreates group 0
    # (leader under its name, worker with the old worker StatefulSet) once it can.
    lws, objects = rolling_state([([INF, HYB], "old", False), ([INF, HYB], "old", True)],
                                 replicas=2, sts_replicas=2, partition=1)
    prediction = predict_scale(view_of(objects), lws, 1, NOW)
    assert names(prediction.victims) == ["llm-1", "llm-1-1"]
    assert names(prediction.possible_victims) == ["llm-0", "llm-0-1"]
    assert fates(prediction) == [(1, "victim"), (0, "possible-victim")]
    (group,) = prediction.tie_groups
    assert group.removed == 2 and "rolling update" in group.why
    assert any("replaces the outdated group 0 " in note for note in prediction.notes)


def test_a_kept_surge_group_of_an_old_revision_is_replaced_not_blocked():
    # Mid-update with surge 1: groups 0-4 of the old revision, group 5 (the surge) new
    # and not ready; 5 -> 3 keeps 3 + 1 groups (3 not updated > maxSurge), but group 3 is
    # outdated: the widened rolling step recreates it before the surge is reclaimed.
    old = [([HYB, HYB, HYB], "old", index != 2) for index in range(5)]
    lws, objects = rolling_state([*old, ([HYB, INF, HYB], lf.REVISION, False)],
                                 replicas=5, sts_replicas=6, partition=5, max_surge=1)
    prediction = predict_scale(view_of(objects), lws, 3, NOW)
    assert names(prediction.victims) == ["llm-5", "llm-5-1", "llm-5-2",
                                         "llm-4", "llm-4-1", "llm-4-2"]
    assert not prediction.blocked
    assert fates(prediction) == [(5, "victim"), (4, "victim"), (3, "possible-victim"),
                                 (2, "possible-victim"), (1, "possible-victim"),
                                 (0, "possible-victim")]
    assert "llm-3-2" in names(prediction.possible_victims)
    assert not any("keeps group" in note for note in prediction.notes)


def test_groups_below_the_rollout_partition_and_updated_groups_are_not_replaced():
    # rollingUpdateConfiguration.partition 1: the controller never lowers the leader
    # StatefulSet's partition below it, so group 0 keeps its old revision.
    lws, objects = rolling_state([([HYB, HYB], "old", True), ([HYB, HYB], "old", True),
                                  ([HYB, HYB], lf.REVISION, True), ([INF, INF], "old", True)],
                                 replicas=4, sts_replicas=4, partition=2, floor=1)
    prediction = predict_scale(view_of(objects), lws, 3, NOW)
    assert fates(prediction) == [(3, "victim"), (2, "survives"), (1, "possible-victim"),
                                 (0, "survives")]
    assert names(prediction.possible_victims) == ["llm-1", "llm-1-1"]


def test_a_protected_group_the_update_may_recreate_is_judged_gone():
    # The worst case takes every possible victim: the inference group 0 may be recreated
    # while the hybrid group 1 survives the scale-down.
    lws, objects = rolling_state([([INF, INF], "old", True), ([HYB, HYB], lf.REVISION, True),
                                  ([HYB, HYB], "old", True)],
                                 replicas=3, sts_replicas=3, partition=1)
    verdict = assess_scale(view_of(objects), POLICY, lws, 2, NOW).verdict
    assert not verdict.allowed
    (violation,) = verdict.violations
    assert violation.rule == "protectedLast"
    assert violation.message.startswith("may delete protected-pool pods llm-0 (node inf-1")
    assert any("rolling update is under way" in w for w in verdict.warnings)
    # no lower count keeps group 0 from the update: only the current count is safe
    assert verdict.safe_replicas == 3
    assert violation.fixes == [
        "wait for the rolling update under way to complete, then retry: until then it may "
        "delete and recreate outdated group 0, which the scale-down keeps"]


def test_possible_victims_alone_are_judged():
    # 3 -> 3 removes no group, yet the update may recreate the inference group.
    lws, objects = rolling_state([([INF, INF], "old", True), ([HYB, HYB], "old", True),
                                  ([HYB, HYB], lf.REVISION, True)],
                                 replicas=3, sts_replicas=3, partition=2)
    prediction = predict_scale(view_of(objects), lws, 3, NOW)
    assert prediction.victims == [] and names(prediction.possible_victims)[:2] == [
        "llm-1", "llm-1-1"]
    verdict = assess_scale(view_of(objects), POLICY, lws, 3, NOW).verdict
    assert [v.rule for v in verdict.violations] == ["protectedLast"]


def test_a_scale_up_removes_nothing():
    lws, objects = lf.lws_state([[INF, HYB], [HYB, HYB]])
    prediction = predict_scale(view_of(objects), lws, 5, NOW)
    assert prediction.victims == [] and prediction.blocked == []
    assert {g.fate for g in prediction.units} == {"survives"}


def test_a_missing_replicas_annotation_stops_the_controller_during_an_update():
    lws, objects = surge_state(ready_zero=True, ready_one=True)
    del objects[1]["metadata"]["annotations"][lf.REPLICAS_ANNOTATION]
    prediction = predict_scale(view_of(objects), lws, 2, NOW)
    assert prediction.victims == []
    assert names([b.pod for b in prediction.blocked]) == ["llm-3", "llm-3-1", "llm-2", "llm-2-1"]
    assert any("annotation" in note for note in prediction.notes)


def test_without_the_leader_statefulset_in_view_groups_above_the_target_go():
    lws, objects = lf.lws_state([[HYB, HYB], [HYB, HYB]])
    objects = [o for o in objects if o["metadata"]["name"] != "llm" or o["kind"] != "StatefulSet"]
    prediction = predict_scale(view_of(objects), lws, 1, NOW)
    # the leader pods still point at their StatefulSet, which the view does not hold
    assert names(prediction.victims) == ["llm-1", "llm-1-1"]
    assert any("not in the view" in note for note in prediction.notes)


def test_terminating_and_failed_pods_are_not_counted():
    lws, objects = lf.lws_state([[HYB, HYB], [INF, INF]])
    for obj in objects:
        if obj["metadata"]["name"] == "llm-1-1" and obj["kind"] == "Pod":
            obj["metadata"]["deletionTimestamp"] = "2026-03-15T11:59:00Z"
    prediction = predict_scale(view_of(objects), lws, 1, NOW)
    assert names(prediction.victims) == ["llm-1"]


# --- verdict, safe count, clamp -----------------------------------------------------------


def test_an_inference_group_going_while_a_hybrid_group_survives_is_denied():
    lws, objects = lf.lws_state([[HYB, HYB], [HYB, HYB], [INF, INF]])
    result = assess_scale(view_of(objects), POLICY, lws, 2, NOW)
    verdict = result.verdict
    assert not verdict.allowed
    (violation,) = verdict.violations
    assert violation.rule == "protectedLast"
    assert "llm-2 (node inf-1, pool inference)" in violation.message
    assert "llm-2-1 (node inf-1, pool inference)" in violation.message
    assert "llm-0 (node hyb-1, pool hybrid)" in violation.message
    assert "deletion cost" not in " ".join(verdict.warnings)
    assert "deletion cost" not in violation.message
    # a group is moved by recreating it: its leader pod, named, is what to delete
    assert violation.fixes == [
        "delete the leader pod of group 2 (kubectl delete pod -n ml llm-2): LeaderWorkerSet "
        "ml/llm recreates each whole group where the scheduler places it now; retry once it "
        "runs outside protected pools"]
    assert verdict.safe_replicas == 3


def test_a_mixed_group_counts_each_pod():
    # group 2's leader is on hybrid, its worker on inference: the worker counts
    lws, objects = lf.lws_state([[HYB, HYB], [HYB, HYB], [HYB, INF]])
    result = assess_scale(view_of(objects), POLICY, lws, 2, NOW)
    (violation,) = result.verdict.violations
    assert "llm-2-1 (node inf-1" in violation.message
    assert result.verdict.safe_replicas == 3


def test_hybrid_groups_on_top_are_allowed():
    lws, objects = lf.lws_state([[INF, INF], [INF, HYB], [HYB, HYB], [HYB, HYB]])
    result = assess_scale(view_of(objects), POLICY, lws, 2, NOW)
    assert result.verdict.allowed and not result.verdict.violations
    assert result.verdict.safe_replicas == 2


def test_the_safe_count_is_given_to_the_quick_check_too():
    lws, objects = lf.lws_state([[HYB, HYB], [HYB, HYB], [INF, HYB], [HYB, HYB]])
    result = assess_scale(view_of(objects), POLICY, lws, 1, NOW, quick=True)
    assert result.verdict.safe_replicas == 3
    assert "scale to 3 groups or more" in result.verdict.violations[0].message


def test_a_blocked_surge_group_on_inference_is_judged_in_the_end_state():
    lws, objects = surge_state(ready_zero=False, ready_one=False)
    result = assess_scale(view_of(objects), POLICY, lws, 2, NOW)
    assert [v.rule for v in result.verdict.violations] == ["protectedLast"]
    assert "llm-2 (node inf-1" in result.verdict.violations[0].message


def test_min_protected_replicas_counts_pods_of_the_new_groups():
    policy = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000,
                                      "protected": True}, {"name": "hybrid", "deletionCost": -100}],
                           "scaleDown": {"minProtectedReplicas": "50%", "protectedLast": False}})
    lws, objects = lf.lws_state([[INF, INF], [HYB, HYB], [INF, INF]])
    result = assess_scale(view_of(objects), policy, lws, 2, NOW)
    # 50% of the 4 pods of 2 groups = 2; 2 protected pods remain
    assert result.verdict.allowed
    result = assess_scale(view_of(objects), policy, lws, 1, NOW)
    assert result.verdict.allowed  # 50% of 2 pods: 1; group 0 keeps 2
    lws, objects = lf.lws_state([[HYB, INF], [HYB, HYB], [INF, INF]])
    result = assess_scale(view_of(objects), policy, lws, 2, NOW)
    (violation,) = result.verdict.violations
    assert violation.rule == "minProtectedReplicas"
    assert "2 (50% of the 4 pods of 2 groups of 2, rounded up)" in violation.message


def test_the_clamp_lowers_an_autoscaler_to_whole_safe_groups():
    lws, objects = lf.lws_state([[HYB, HYB], [HYB, INF], [HYB, HYB], [HYB, HYB]])
    clamp = clamp_scale_down(view_of(objects), POLICY, lws, 1, 4, NOW)
    assert clamp.replicas == 2 and clamp.clamped
    clamp = clamp_scale_down(view_of(objects), POLICY, lws, 3, 4, NOW)
    assert clamp.replicas == 3 and not clamp.clamped
    lws, objects = lf.lws_state([[HYB, HYB], [INF, INF]])
    clamp = clamp_scale_down(view_of(objects), POLICY, lws, 1, 2, NOW)
    assert clamp.holds


def test_the_pod_selector_and_the_skip_label_read_the_worker_template():
    lws = lf.leader_worker_set("llm")
    selective = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000,
                                         "protected": True},
                                        {"name": "hybrid", "deletionCost": -100}],
                              "podSelector": {"matchLabels": {"app": "llm"}}})
    assert out_of_scope_reason(selective, {}, lws) is None
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"][SKIP_LABEL] = "true"
    assert "pod template of LeaderWorkerSet ml/llm" in out_of_scope_reason(selective, {}, lws)


# --- properties ---------------------------------------------------------------------------

layouts = st.integers(1, 4).flatmap(
    lambda size: st.lists(st.lists(st.sampled_from([INF, HYB]), min_size=size, max_size=size),
                          min_size=0, max_size=6))


@settings(max_examples=60, deadline=None)
@given(layout=layouts, data=st.data())
def test_victims_are_exactly_the_pods_of_the_groups_at_or_above_the_target(layout, data):
    to = data.draw(st.integers(0, len(layout) + 1))
    lws, objects = lf.lws_state(layout) if layout else lf.lws_state([], replicas=0)
    prediction = predict_scale(view_of(objects), lws, to, NOW)
    expected = [f"llm-{g}" + (f"-{w}" if w else "")
                for g in reversed(range(to, len(layout))) for w in range(len(layout[g]))]
    assert names(prediction.victims) == expected
    assert len(prediction.victims) + len(prediction.survivors) == sum(map(len, layout))
    safe = assess_scale(view_of(objects), POLICY, lws, to, NOW).verdict.safe_replicas
    protected_groups = [g for g, nodes in enumerate(layout) if INF in nodes]
    assert safe == (max(protected_groups) + 1 if protected_groups else 0)
    judged = assess_scale(view_of(objects), POLICY, lws, safe, NOW).prediction
    assert all(p.node_name != INF for p in judged.victims)


@settings(max_examples=60, deadline=None)
@given(ready=st.lists(st.booleans(), min_size=1, max_size=6), data=st.data())
def test_with_a_surge_victims_and_blocked_are_the_groups_above_the_target(ready, data):
    surge = data.draw(st.sampled_from([0, 1, 2, "50%", "100%"]))
    unavailable = data.draw(st.sampled_from([0, 1, "25%"]))
    to = data.draw(st.integers(0, len(ready)))
    lws = lf.leader_worker_set("llm", replicas=len(ready), size=2, max_surge=surge,
                               max_unavailable=unavailable)
    sts = lf.leader_statefulset(lws)
    objects = [lws, sts]
    for index, is_ready in enumerate(ready):
        objects += lf.group(lws, sts, index, [HYB, INF], ready=is_ready)
    prediction = predict_scale(view_of(objects), lws, to, NOW)
    going = [f"llm-{g}" + w for g in reversed(range(to, len(ready))) for w in ("", "-1")]
    assert names(prediction.victims) + names([b.pod for b in prediction.blocked]) == going
    kept = {g.index for g in prediction.units if g.fate == "blocked"}
    assert kept == set(range(to, to + len(kept)))  # the lowest groups above the target wait
    if all(ready[:to]):
        assert not kept


# --- rollingUpdateConfiguration.partition with maxSurge ------------------------------------
# rollingUpdateParameters ends with `stsPartition = max(stsPartition, lws partition)`, so
# the groups below the rollout's partition keep their old revision; getReplicaStates marks
# them not updated, calculateLWSUnreadyReplicas counts them, and wantReplicas keeps the
# surge they call for until the partition is reset (the API's doc on `partition`).


def partitioned_state(*, to_replicas_layout: list[tuple[list[str], str, bool]],
                      replicas: int, sts_replicas: int, floor: int, max_surge: int,
                      max_unavailable: int = 1) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lws = lf.leader_worker_set("llm", replicas=replicas, size=2, max_surge=max_surge,
                               max_unavailable=max_unavailable, partition=floor)
    sts = lf.leader_statefulset(lws, replicas=sts_replicas, partition=floor)
    objects = [lws, sts]
    for index, (nodes, revision, ready) in enumerate(to_replicas_layout):
        objects += lf.group(lws, sts, index, nodes, revision=revision, ready=ready)
    return lws, objects


def test_the_surge_the_partition_holds_survives_instead_of_waiting():
    # partition 2, maxSurge 1, maxUnavailable 1, mid-update: groups 0 and 1 old (below the
    # partition), 2 and 3 updated, the surge group 4 updated. 4 -> 3: groups 0 and 1 are
    # not updated, 2 > maxSurge, so wantReplicas is 3 + 1; they stay so while the
    # partition holds, so group 3 is kept for good and only group 4 goes.
    lws, objects = partitioned_state(
        to_replicas_layout=[([HYB, HYB], "old", True), ([HYB, HYB], "old", True),
                            ([HYB, HYB], lf.REVISION, True), ([INF, INF], lf.REVISION, True),
                            ([HYB, HYB], lf.REVISION, True)],
        replicas=4, sts_replicas=5, floor=2, max_surge=1)
    prediction = predict_scale(view_of(objects), lws, 3, NOW)
    assert fates(prediction) == [(4, "victim"), (3, "survives"), (2, "survives"),
                                 (1, "survives"), (0, "survives")]
    assert names(prediction.victims) == ["llm-4", "llm-4-1"]
    assert not prediction.blocked and not prediction.possible_victims
    assert any("partition holds groups 0, 1" in note and "surge group 3" in note
               for note in prediction.notes)
    # group 3 on inference stays for as long as the partition holds: nothing protected goes
    verdict = assess_scale(view_of(objects), POLICY, lws, 3, NOW).verdict
    assert verdict.allowed and verdict.safe_replicas == 3


def test_only_the_surge_beyond_what_the_partition_holds_waits():
    # partition 1, maxSurge 2, maxUnavailable 0; group 0 old (held), group 1 updated but
    # not ready. 4 -> 2: 2 unready <= maxSurge keeps 2 + 2; the held group alone keeps
    # 2 + 1. Group 2 stays, group 3 waits for group 1, groups 4 and 5 go.
    lws, objects = partitioned_state(
        to_replicas_layout=[([HYB, HYB], "old", True), ([HYB, HYB], lf.REVISION, False),
                            ([INF, INF], lf.REVISION, True), ([INF, INF], lf.REVISION, True),
                            ([HYB, HYB], lf.REVISION, True), ([HYB, HYB], lf.REVISION, True)],
        replicas=4, sts_replicas=6, floor=1, max_surge=2, max_unavailable=0)
    prediction = predict_scale(view_of(objects), lws, 2, NOW)
    assert fates(prediction)[:4] == [(5, "victim"), (4, "victim"), (3, "blocked"),
                                     (2, "survives")]
    assert {b.waiting_on for b in prediction.blocked} == {"llm-1"}
    verdict = assess_scale(view_of(objects), POLICY, lws, 2, NOW).verdict
    # group 3 (inference) goes once group 1 is ready while hybrid group 0 stays
    assert [v.rule for v in verdict.violations] == ["protectedLast"]
    assert "llm-3 (node inf-1" in verdict.violations[0].message
    assert "llm-2 " not in verdict.violations[0].message


def test_a_group_below_the_partition_of_the_current_revision_holds_nothing():
    # At rest (every group updated) the partition pins nothing: the surge kept for the
    # unready group 0 goes once it is ready.
    lws, objects = partitioned_state(
        to_replicas_layout=[([HYB, HYB], lf.REVISION, False), ([HYB, HYB], lf.REVISION, False),
                            ([INF, INF], lf.REVISION, True), ([HYB, HYB], lf.REVISION, True)],
        replicas=4, sts_replicas=4, floor=2, max_surge=1)
    prediction = predict_scale(view_of(objects), lws, 2, NOW)
    assert fates(prediction)[:2] == [(3, "victim"), (2, "blocked")]
    assert not any("partition holds" in note for note in prediction.notes)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_blocked_groups_are_the_ones_that_go_once_the_unpinned_groups_are_ready(data):
    """Predicting again once every group the partition does not hold is ready and
    updated, with the leader StatefulSet at the replicas the controller writes now: the
    groups blocked before are the victims then, and nothing is blocked any more."""
    total = data.draw(st.integers(1, 6))
    to = data.draw(st.integers(0, total))
    floor = data.draw(st.integers(0, total))
    surge = data.draw(st.sampled_from([1, 2, "50%", "100%"]))
    unavailable = data.draw(st.sampled_from([0, 1, "25%"]))
    # groups above the target of an old revision would be recreated by the update first
    # (possible victims); here they are of the current one, so every kept group is plain
    old = [index < to and data.draw(st.booleans()) for index in range(total)]
    ready = [data.draw(st.booleans()) for _ in range(total)]

    def state(sts_replicas: int, settled: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        lws = lf.leader_worker_set("llm", replicas=total, size=2, max_surge=surge,
                                   max_unavailable=unavailable, partition=floor)
        sts = lf.leader_statefulset(lws, replicas=sts_replicas, partition=max(floor, 1))
        objects = [lws, sts]
        for index in range(sts_replicas):
            pinned = index < floor and old[index]
            revision = "old" if pinned or (old[index] and not settled) else lf.REVISION
            objects += lf.group(lws, sts, index, [HYB, INF], revision=revision,
                                ready=settled or ready[index])
        return lws, objects

    lws, objects = state(total, settled=False)
    before = predict_scale(view_of(objects), lws, to, NOW)
    going_later = {g.index for g in before.units if g.fate == "blocked"}
    kept = max([to, *(g.index + 1 for g in before.units if g.fate in ("blocked", "survives"))])
    lws, objects = state(kept, settled=True)
    lws["spec"]["replicas"] = to  # the scale has been applied
    after = predict_scale(view_of(objects), lws, to, NOW)
    assert not after.blocked
    assert {g.index for g in after.units if g.fate == "victim"} == going_later
