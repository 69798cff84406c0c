"""A scale-down that completes the canary's current step, and the steps that follow it.

Upstream (github.com/argoproj/argo-rollouts v1.10.2):
- rollout/canary.go `syncRolloutStatusCanary`, `completedCurrentCanaryStep`: each full sync
  moves status.currentStepIndex on once `AtDesiredReplicaCountsForCanary` holds for a
  setWeight step; rollout/pause.go `CompletedCanaryPauseStep`: a pause with a duration ends
  when it has passed, one without waits for a person;
- utils/replicaset/canary_test.go `TestAtDesiredReplicaCountsForCanary` and
  `TestAllReplicaProgressThresholdMet`, ported below as tables (the case where the stable
  ReplicaSet's status lags its spec is not: poolguard reads the status once the victims
  are gone, which is the spec).
The scenarios are worked out by hand from `CalculateReplicaCountsForBasicCanary`
(maxSurge and maxUnavailable default to 25%: 1 and 1 at 4 replicas).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import factories as f
from tests.support import rollouts as ro
from webhook.core.argorollouts.argo_rollout_counts import Counted
from webhook.core.argorollouts.argo_rollout_sync import (
    Tracked,
    Variant,
    reachable_lowest,
    sync_once,
)
from webhook.core.argorollouts.canary_steps import (
    at_desired_counts,
    following_steps,
    progress_threshold_met,
)
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.predict import predict_scale
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-03-01T00:00:00Z")
NODES = [f.node("inf-1", "inference"), f.node("inf-2", "inference"),
         f.node("hyb-1", "hybrid"), f.node("hyb-2", "hybrid"), f.node("bare-1", None)]
POLICY = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                                 {"name": "hybrid", "deletionCost": -100}]})


def _pods(rs: dict[str, Any], prefix: str, nodes: list[str], costs: list[str | None],
          ready: list[bool] | None = None) -> list[dict[str, Any]]:
    return [f.pod(f"{prefix}-{i}", owner=rs, node_name=node, cost=costs[i],
                  ready=(ready or [True] * len(nodes))[i],
                  ready_time=f"2026-01-01T00:00:{i:02d}Z")
            for i, node in enumerate(nodes)]


def mid_canary(steps: list[dict[str, Any]], canary_ready: list[bool],
               **canary: Any) -> tuple[Snapshot, dict[str, Any]]:
    """8 replicas at step 0 (setWeight 25): the canary web-v2 has 2 pods on an unlabelled
    node, the stable web-v1 6: 3 on the hybrid pool (cost -100), 3 on inference (1000)."""
    objects, rollout = canary_objects(steps, canary_ready, **canary)
    return Snapshot(objects), rollout


def canary_objects(steps: list[dict[str, Any]], canary_ready: list[bool],
                   **canary: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The objects of `mid_canary`, nodes included, and the Rollout."""
    rollout = ro.rollout("web", 8, canary={"steps": steps, **canary}, current="v2",
                         stable="v1", step=0)
    stable = ro.replicaset(rollout, "v1", 6, revision=1)
    new = ro.replicaset(rollout, "v2", 2, revision=2, available=sum(canary_ready))
    pods = (_pods(stable, "s", ["hyb-1", "hyb-2", "hyb-1", "inf-1", "inf-2", "inf-1"],
                  ["-100"] * 3 + ["1000"] * 3)
            + _pods(new, "c", ["bare-1", "bare-1"], [None, None], ready=canary_ready))
    return [rollout, stable, new, *NODES, *pods], rollout


SHORT_PAUSE = [{"setWeight": 25}, {"pause": {"duration": "1s"}}, {"setWeight": 50},
               {"pause": {}}]


def test_a_scale_down_that_completes_the_step_lets_the_next_set_weight_shrink_the_stable():
    """8 -> 4: the split at 25% is canary 1, stable 3. The stable goes 6 -> 3 (its hybrid
    pods, cost -100), the canary 2 -> 1 (its unready pod), and the one canary pod left is
    available: AtDesiredReplicaCountsForCanary holds, so the controller completes step
    0, waits the 1 s pause, and at setWeight 50 (canary 2, stable 2; minAvailable 3 of 4
    available) takes the stable to 2 before any new canary pod is up: an inference pod
    goes while the canary pod on the unlabelled node stays."""
    view, rollout = mid_canary(SHORT_PAUSE, canary_ready=[True, False])
    prediction = predict_scale(view, rollout, 4, NOW)
    assert prediction.child_targets == {"web-v1": (6, 3), "web-v2": (2, 1)}
    assert sorted(p.name for p in prediction.victims) == ["c-1", "s-0", "s-1", "s-2"]
    assert {p.name for p in prediction.possible_victims} == {"s-3", "s-4", "s-5"}
    (group,) = [g for g in prediction.tie_groups if "canary step 0" in (g.why or "")]
    assert group.removed == 1 and "web-v1 down to 2" in (group.why or "")
    assert any("canary step 0 of Rollout web completes" in note and "steps 1-2" in note
               and "pause without a duration at step 3" in note for note in prediction.notes)
    verdict = assess_scale(view, POLICY, rollout, 4, NOW).verdict
    assert not verdict.allowed
    assert [v.rule for v in verdict.violations] == ["protectedLast"]
    message = verdict.violations[0].message
    assert message.startswith("may delete protected-pool pod s-")
    assert "pool inference) while c-0 (node bare-1" in message
    assert verdict.safe_replicas is not None and verdict.safe_replicas > 4


def test_the_steps_stop_at_a_pause_without_a_duration():
    # the same scale-down completes step 0, but step 1 waits for a person to resume
    view, rollout = mid_canary([{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}],
                               canary_ready=[True, False])
    prediction = predict_scale(view, rollout, 4, NOW)
    assert not prediction.possible_victims
    assert any("no further step, up to the pause without a duration at step 1" in note
               for note in prediction.notes)
    assert assess_scale(view, POLICY, rollout, 4, NOW).verdict.allowed


def test_a_step_the_scale_down_does_not_complete_is_not_followed():
    # no canary pod is available: step 0 waits for the canary's pods to come up, which is
    # the rollout's own progress, not the scale-down's
    view, rollout = mid_canary(SHORT_PAUSE, canary_ready=[False, False])
    prediction = predict_scale(view, rollout, 4, NOW)
    assert not any("completes with the new count" in note for note in prediction.notes)
    assert not any("canary step" in (g.why or "") for g in prediction.tie_groups)


def test_timed_steps_to_the_end_promote_the_canary_and_empty_the_stable():
    # every step after the completed one ends by itself: the canary is promoted and the
    # old stable ReplicaSet goes to 0, so every stable pod may go
    view, rollout = mid_canary([{"setWeight": 25}, {"pause": {"duration": 5}},
                                {"setWeight": 50}, {"pause": {"duration": "10s"}}],
                               canary_ready=[True, False])
    prediction = predict_scale(view, rollout, 4, NOW)
    assert {p.name for p in prediction.possible_victims} == {"s-3", "s-4", "s-5"}
    (group,) = [g for g in prediction.tie_groups if "canary step 0" in (g.why or "")]
    assert group.removed == 3 and "web-v1 down to 0" in (group.why or "")
    assert any("up to the end of the steps" in note for note in prediction.notes)


def test_a_timed_pause_under_way_ends_and_the_next_set_weight_follows():
    # at step 1 (the 1 s pause) the new count splits as at step 0; the pause ends by
    # itself, and setWeight 50 takes the stable to 2
    objects, rollout = canary_objects(SHORT_PAUSE, canary_ready=[True, False])
    rollout["status"]["currentStepIndex"] = 1
    prediction = predict_scale(Snapshot(objects), rollout, 4, NOW)
    assert any("canary step 1 of Rollout web completes with the new count (its pause ends "
               "by itself)" in note and "step 2, up to the pause" in note
               for note in prediction.notes)
    assert {p.name for p in prediction.possible_victims} == {"s-3", "s-4", "s-5"}


def test_an_analysis_under_way_is_not_followed():
    # an analysis step completes when its AnalysisRun succeeds, with or without the scale
    steps = [{"setWeight": 25}, {"analysis": {"templates": [{"templateName": "t"}]}},
             {"setWeight": 50}, {"pause": {}}]
    objects, rollout = canary_objects(steps, canary_ready=[True, False])
    rollout["status"]["currentStepIndex"] = 1
    prediction = predict_scale(Snapshot(objects), rollout, 4, NOW)
    assert not any("completes with the new count" in note for note in prediction.notes)
    assert not prediction.possible_victims


def test_a_paused_rollout_moves_no_step():
    view, rollout = mid_canary(SHORT_PAUSE, canary_ready=[True, False])
    rollout["spec"]["paused"] = True
    prediction = predict_scale(view, rollout, 4, NOW)
    assert not any("completes with the new count" in note for note in prediction.notes)


# TestAtDesiredReplicaCountsForCanary: (case, setWeight, new spec/available, stable
# spec/available, want); newRollout(4, setWeight, maxSurge 1, maxUnavailable 1) with a
# setCanaryScale that a canary without traffic routing ignores.
AT_DESIRED_CASES = [
    ("we are at desired replica counts and availability", 50, (2, 2), (2, 2), True),
    ("new replicaset is not at desired counts or availability", 50, (2, 1), (2, 2), False),
    ("stable replicaset is not at desired counts or availability", 75, (3, 3), (2, 2), False),
    ("stable replicaset is not at desired availability but is at correct count", 75, (3, 3),
     (1, 0), True),
]


@pytest.mark.parametrize(("case", "weight", "new", "stable", "want"), AT_DESIRED_CASES,
                         ids=[c[0] for c in AT_DESIRED_CASES])
def test_at_desired_counts_matches_the_upstream_table(case, weight, new, stable, want):
    rollout = {"spec": {"replicas": 4, "strategy": {"canary": {
        "maxSurge": 1, "maxUnavailable": 1,
        "steps": [{"setWeight": weight, "setCanaryScale": {"weight": 2, "replicas": 2}}]}}},
        "status": {"currentPodHash": "current", "stableRS": "stable"}}
    states = [Counted("newRS", "", *new), Counted("stableRS", "", *stable)]
    assert at_desired_counts(rollout, states, "newRS", "stableRS") is want


def test_an_older_replicaset_with_available_pods_holds_a_basic_canary_step():
    rollout = {"spec": {"replicas": 4, "strategy": {"canary": {
        "maxSurge": 1, "maxUnavailable": 1, "steps": [{"setWeight": 50}]}}},
        "status": {"currentPodHash": "current", "stableRS": "stable"}}
    states = [Counted("newRS", "", 2, 2), Counted("stableRS", "", 2, 2),
              Counted("oldRS", "", 1, 1)]
    assert not at_desired_counts(rollout, states, "newRS", "stableRS")
    states[2] = Counted("oldRS", "", 0, 0)
    assert at_desired_counts(rollout, states, "newRS", "stableRS")


# TestAllReplicaProgressThresholdMet: (threshold, available, spec.replicas, desired, want)
THRESHOLD_CASES = [
    ({"type": "Percent", "value": 90}, 9, 0, 10, True),
    ({"type": "Pods", "value": 9}, 9, 0, 10, True),
    ({"type": "Percent", "value": 90}, 8, 0, 10, False),
    ({"type": "Pods", "value": 8}, 7, 0, 10, False),
    ({"type": "Pods", "value": -100}, 10, 10, 10, True),
    (None, 10, 5, 10, False),
    ({"type": "Percent", "value": 100}, 100, 0, 10, True),
    ({"type": "Percent", "value": 90}, 0, 0, 0, True),
]


@pytest.mark.parametrize(("threshold", "available", "replicas", "desired", "want"),
                         THRESHOLD_CASES)
def test_progress_threshold_matches_the_upstream_table(threshold, available, replicas,
                                                       desired, want):
    canary = {} if threshold is None else {"replicaProgressThreshold": threshold}
    rollout = {"spec": {"strategy": {"canary": canary}}}
    new = Counted("newRS", "", replicas, available)
    assert progress_threshold_met(rollout, new, desired) is want
    # a missing ReplicaSet never meets it
    assert progress_threshold_met(rollout, None, desired) is False


# --- the controller walked through its steps ----------------------------------------------

STEP_KINDS = [{"pause": {"duration": 1}}, {"pause": {}}, {"setHeaderRoute": {"name": "h"}},
              {"analysis": {"templates": [{"templateName": "t"}]}}]


@settings(max_examples=150, deadline=None)
@given(to=st.integers(0, 8),
       fences=st.sampled_from([(0, 1), (1, 0), (1, 1), ("25%", "25%"), (2, "50%")]),
       weights=st.lists(st.sampled_from([10, 25, 50, 75, 100]), min_size=1, max_size=3),
       sizes=st.tuples(st.integers(0, 8), st.integers(0, 8)), data=st.data())
def test_no_walk_of_syncs_and_steps_goes_below_the_reported_sizes(to, fences, weights, sizes,
                                                                  data):
    """Syncs (`reconcileCanaryReplicaSets`), availability changes (victims gone, pods up)
    and step completions (`completedCurrentCanaryStep`: a sizing step at its desired
    counts, a pause with a duration, a route, an analysis taken as succeeding; never a
    pause without a duration) in any order never take a ReplicaSet below the lowest size
    reported for the new count: over the current step's syncs when the current step waits
    on more than time, and over the following steps too when it does not."""
    steps: list[dict[str, Any]] = []
    for weight in weights:
        steps.append({"setWeight": weight})
        steps += data.draw(st.lists(st.sampled_from(STEP_KINDS), max_size=2))
    start = data.draw(st.integers(0, len(steps) - 1))
    rollout = {"spec": {"replicas": to, "strategy": {"canary": {
        "maxSurge": fences[0], "maxUnavailable": fences[1], "steps": steps}}},
        "status": {"currentPodHash": "v2", "stableRS": "v1", "currentStepIndex": start}}
    states = [Tracked(name, name, size, data.draw(st.integers(0, size)), str(revision),
                      revision, lowest=size)
              for revision, (name, size) in enumerate(zip(("v1", "v2"), sizes, strict=True))]
    ready = {rs.name: rs.available for rs in states}

    def fresh(name: str, size: int) -> int:
        return min(size, ready[name])

    variant = Variant(False, True)
    least = reachable_lowest(rollout, states, "v2", "v1", variant, fresh)
    assert least is not None
    following = following_steps(rollout, states, "v2", "v1", [variant], fresh)
    if following is not None:
        least = {name: min(size, following.lowest[name]) for name, size in least.items()}
    walk = {rs.name: replace(rs) for rs in states}
    index, came_up = start, False
    for move, name in data.draw(st.lists(st.tuples(
            st.sampled_from(["sync", "gone", "up", "step"]), st.sampled_from(["v1", "v2"])),
            max_size=30)):
        at = {**rollout, "status": {**rollout["status"], "currentStepIndex": index}}
        rs = walk[name]
        if move == "sync":
            sync_once(at, walk, "v2", "v1", variant)
        elif move == "gone":
            rs.available = min(rs.available, fresh(rs.name, rs.lowest))
        elif move == "up":
            came_up = came_up or (name == "v2" and rs.available < rs.replicas)
            rs.available = rs.replicas
        elif index < len(steps):
            # the current step completing after canary pods came up, or on an analysis,
            # is the rollout's own progress, which happens with or without the scale
            step = steps[index]
            if "pause" in step:
                index += "duration" in step["pause"]
            elif "analysis" in step:
                index += index > start
            elif "setWeight" not in step:
                index += 1  # a route
            elif (index > start or not came_up) and at_desired_counts(
                    at, list(walk.values()), "v2", "v1"):
                index += 1
        assert all(walk[n].lowest >= least[n] for n in walk), (index, steps)


def test_with_dynamic_stable_scale_the_next_weight_sets_the_stable_count():
    """Traffic-routed with dynamicStableScale, 8 -> 4 at setWeight 25 (canary 1, stable
    ceil(75% of 4) = 3; the router's stable weight 75 gives 3 too). The canary pod left
    is available, so step 0 completes; after the 1 s pause, setWeight 50 sets the router's
    weights to 50/50 and CalculateReplicaCountsForTrafficRoutedCanary takes the stable to
    ceil(50% of 4) = 2."""
    objects, rollout = canary_objects(SHORT_PAUSE, [True, False], dynamicStableScale=True,
                                      trafficRouting={"nginx": {"stableIngress": "web"}})
    rollout["status"]["canary"] = {"weights": {
        "canary": {"weight": 25, "podTemplateHash": "v2"},
        "stable": {"weight": 75, "podTemplateHash": "v1"}}}
    prediction = predict_scale(Snapshot(objects), rollout, 4, NOW)
    assert prediction.child_targets == {"web-v1": (6, 3), "web-v2": (2, 1)}
    (group,) = [g for g in prediction.tie_groups if "canary step 0" in (g.why or "")]
    assert group.removed == 1 and "web-v1 down to 2" in (group.why or "")
    assert not assess_scale(Snapshot(objects), POLICY, rollout, 4, NOW).verdict.allowed
