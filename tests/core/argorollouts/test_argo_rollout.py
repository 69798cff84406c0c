"""Scale-down prediction for Argo Rollouts `Rollout`s (argoproj.io/v1alpha1).

Upstream (github.com/argoproj/argo-rollouts, branch release-1.10):
- utils/replicaset/canary_test.go: `TestCalculateReplicaCountsForCanary`,
  `TestApproximateWeightedNewStableReplicaCounts` and
  `TestCalculateReplicaCountsForCanaryTrafficRoutingDynamicScale` are ported below as
  tables, with the Go test's own rollout (newRollout: one step with setWeight and
  setCanaryScale, status currentPodHash "canary", stableRS "stable"; an unset
  maxSurge/maxUnavailable is the zero IntOrString, 0).
- rollout/sync.go, canary.go, bluegreen.go, replicaset.go: the syncs after a change of
  spec.replicas (the end-to-end cases are worked out by hand from that code).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import factories as f
from tests.support import rollouts as ro
from webhook.core.argorollouts.argo_rollout_counts import (
    Counted,
    approximate_counts,
    basic_canary_counts,
    traffic_routed_counts,
)
from webhook.core.argorollouts.argo_rollout_sync import (
    Tracked,
    Variant,
    reachable_lowest,
    sync_once,
)
from webhook.core.model.prediction import ScalePrediction
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.clamp import clamp_scale_down
from webhook.core.scale.predict import predict_scale
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.scale.scope import decide_scale
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-03-01T00:00:00Z")
NODES = [f.node("inf-1", "inference"), f.node("inf-2", "inference"),
         f.node("hyb-1", "hybrid"), f.node("hyb-2", "hybrid")]
POLICY = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                                 {"name": "hybrid", "deletionCost": -100}]})


# --- the arithmetic, against upstream's own tables ----------------------------------------

# TestCalculateReplicaCountsForCanary (utils/replicaset/canary_test.go), every case.
UPSTREAM_CANARY_CASES: list[dict[str, Any]] = [
    {"name": "Do not add extra RSs in scaleDownCount when .Spec.Replica < AvailableReplicas",
     "replicas": 10, "weight": 100, "surge": 3, "unavailable": 0, "stable": 7,
     "stable_available": 8, "canary": 6, "canary_available": 3, "want_stable": 7,
     "want_canary": 6},
    {"name": "Use max surge int to scale up canary",
     "replicas": 10, "weight": 20, "surge": 2, "unavailable": 0, "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0, "want_stable": 10,
     "want_canary": 2},
    {"name": "Use max surge percentage to scale up canary",
     "replicas": 10, "weight": 20, "surge": "20%", "unavailable": 0, "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0, "want_stable": 10,
     "want_canary": 2},
    {"name": "Scale down extra stable replicas",
     "replicas": 10, "weight": 20, "surge": "20%", "unavailable": 0, "stable": 10,
     "stable_available": 10, "canary": 2, "canary_available": 2, "want_stable": 8,
     "want_canary": 2},
    {"name": "Do not go past max surge",
     "replicas": 10, "weight": 30, "surge": 2, "unavailable": 0, "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0, "want_stable": 10,
     "want_canary": 2},
    {"name": "Use max unavailable int to scale down stableRS",
     "replicas": 10, "weight": 20, "surge": 0, "unavailable": 2, "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0, "want_stable": 8,
     "want_canary": 0},
    {"name": "Use max surge percentage to scale down stableRS",
     "replicas": 10, "weight": 20, "surge": 0, "unavailable": "20%", "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0, "want_stable": 8,
     "want_canary": 0},
    {"name": "Do not go past max unavailable",
     "replicas": 10, "weight": 30, "surge": 0, "unavailable": 2, "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0, "want_stable": 8,
     "want_canary": 0},
    {"name": "Use Max Surge and Max Unavailable",
     "replicas": 10, "weight": 50, "surge": 2, "unavailable": 1, "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0, "want_stable": 9,
     "want_canary": 2},
    {"name": "Scale canaryRS to zero on setWeight of 0%",
     "replicas": 10, "weight": 0, "surge": 1, "unavailable": 1, "stable": 10,
     "stable_available": 10, "canary": 1, "canary_available": 1, "want_stable": 10,
     "want_canary": 0},
    {"name": "Scale stable to zero on setWeight of 100%",
     "replicas": 10, "weight": 100, "surge": 1, "unavailable": 1, "stable": 1,
     "stable_available": 1, "canary": 10, "canary_available": 10, "want_stable": 0,
     "want_canary": 10},
    {"name": "Do not scale canaryRS down to zero on non-zero weight",
     "replicas": 1, "weight": 20, "surge": 1, "unavailable": 0, "stable": 1,
     "stable_available": 1, "canary": 0, "canary_available": 0, "want_stable": 1,
     "want_canary": 1},
    {"name": "Do not scale canaryRS down to zero on non-100 weight",
     "replicas": 1, "weight": 90, "surge": 1, "unavailable": 0, "stable": 1,
     "stable_available": 1, "canary": 0, "canary_available": 0, "want_stable": 1,
     "want_canary": 1},
    {"name": "Scale canaryRS to zero on <50 weight without surge",
     "replicas": 1, "weight": 49, "surge": 0, "unavailable": 1, "stable": 1,
     "stable_available": 1, "canary": 0, "canary_available": 0, "want_stable": 1,
     "want_canary": 0},
    {"name": "Scale stableRS down to zero on >=50 weight without surge",
     "replicas": 1, "weight": 51, "surge": 0, "unavailable": 1, "stable": 1,
     "stable_available": 1, "canary": 0, "canary_available": 0, "want_stable": 0,
     "want_canary": 0},
    {"name": "Scale canaryRS to one on >=50 weight without surge and stable replicas",
     "replicas": 1, "weight": 51, "surge": 0, "unavailable": 1, "stable": 0,
     "stable_available": 0, "canary": 0, "canary_available": 0, "want_stable": 0,
     "want_canary": 1},
    {"name": "Scale up Stable before canaryRS",
     "replicas": 10, "weight": 30, "surge": 1, "unavailable": 0, "stable": 1,
     "stable_available": 1, "canary": 0, "canary_available": 0, "want_stable": 7,
     "want_canary": 1, "older": (3, 3)},
    {"name": "Scale down canaryRS and stable",
     "replicas": 10, "weight": 30, "surge": 0, "unavailable": 3, "stable": 8,
     "stable_available": 5, "canary": 4, "canary_available": 4, "want_stable": 7,
     "want_canary": 3},
    {"name": "Scale down stable and canary available",
     "replicas": 10, "weight": 100, "surge": 1, "unavailable": 0, "stable": 10,
     "stable_available": 2, "canary": 10, "canary_available": 8, "want_stable": 2,
     "want_canary": 9},
    {"name": "Do not scale down canaryRS or stable when older RS count >= scaleDownCount",
     "replicas": 10, "weight": 30, "surge": 0, "unavailable": 1, "stable": 8,
     "stable_available": 6, "canary": 4, "canary_available": 2, "want_stable": 8,
     "want_canary": 4, "older": (3, 3)},
    {"name": "Do not round past maxSurge with uneven setWeight divisor",
     "replicas": 10, "weight": 5, "surge": 0, "unavailable": 1, "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0, "want_stable": 9,
     "want_canary": 0},
    {"name": "Do not round past maxSurge with uneven setWeight divisor (part 2)",
     "replicas": 10, "weight": 5, "surge": 0, "unavailable": 1, "stable": 9,
     "stable_available": 9, "canary": 0, "canary_available": 0, "want_stable": 9,
     "want_canary": 1},
    {"name": "Use maxUnavailable of 1 when percentage of maxUnavailable and maxSurge result in "
             "0 replicas",
     "replicas": 10, "weight": 10, "surge": "0%", "unavailable": "0%", "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0, "want_stable": 9,
     "want_canary": 0},
    {"name": "For canary replicas, use setCanaryScale.replicas when specified along with "
             "trafficRouting (and ignore setWeight)",
     "replicas": 1, "stable": 1, "stable_available": 1, "want_stable": 1, "want_canary": 9,
     "weight": 100, "set_canary_scale": {"replicas": 9}, "traffic_routing": True},
    {"name": "Use setCanaryScale.weight for canary replicas when specified with trafficRouting "
             "(and ignore setWeight)",
     "replicas": 4, "stable": 4, "stable_available": 4, "want_stable": 4, "want_canary": 8,
     "weight": 100, "set_canary_scale": {"weight": 200}, "traffic_routing": True},
    {"name": "Ignore setCanaryScale replicas/weight when matchTrafficWeight is true",
     "replicas": 10, "weight": 20, "surge": "20%", "unavailable": 0, "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0,
     "set_canary_scale": {"replicas": 9, "weight": 100, "matchTrafficWeight": True},
     "traffic_routing": True, "want_stable": 10, "want_canary": 2},
    {"name": "Ignore setCanaryScale when trafficRouting is missing and use setWeight for replicas",
     "replicas": 10, "weight": 20, "surge": "20%", "unavailable": 0, "stable": 10,
     "stable_available": 10, "canary": 0, "canary_available": 0,
     "set_canary_scale": {"replicas": 9, "weight": 100}, "traffic_routing": None,
     "want_stable": 10, "want_canary": 2},
    {"name": "honor maxSurge during scale up when stableRS unavailable",
     "replicas": 4, "weight": 100, "surge": 1, "unavailable": 0, "stable": 4,
     "stable_available": 1, "canary": 0, "canary_available": 0, "want_stable": 4,
     "want_canary": 1},
    {"name": "scale down to maxunavailable without exceeding maxSurge",
     "replicas": 3, "weight": 99, "surge": 0, "unavailable": 2, "stable": 3,
     "stable_available": 3, "canary": 0, "canary_available": 0, "want_stable": 1,
     "want_canary": 0},
    {"name": "scale down to maxunavailable without exceeding maxSurge (part 2)",
     "replicas": 3, "weight": 99, "surge": 0, "unavailable": 2, "stable": 1,
     "stable_available": 1, "canary": 0, "canary_available": 0, "want_stable": 1,
     "want_canary": 2},
    {"name": "honor maxUnavailable when aborting or reducing weight part 1",
     "replicas": 4, "weight": 0, "surge": 1, "unavailable": 0, "stable": 0,
     "stable_available": 0, "canary": 4, "canary_available": 4, "want_stable": 1,
     "want_canary": 4},
    {"name": "honor maxUnavailable when aborting or reducing weight part 2",
     "replicas": 4, "weight": 0, "surge": 1, "unavailable": 0, "stable": 1,
     "stable_available": 0, "canary": 4, "canary_available": 4, "want_stable": 1,
     "want_canary": 4},
    {"name": "honor maxUnavailable when aborting or reducing weight part 3",
     "replicas": 4, "weight": 0, "surge": 1, "unavailable": 0, "stable": 1,
     "stable_available": 1, "canary": 4, "canary_available": 4, "want_stable": 1,
     "want_canary": 3},
    {"name": "promote full does not consider weight",
     "promote_full": True, "replicas": 4, "weight": 1, "surge": 4, "unavailable": 4,
     "stable": 4, "stable_available": 4, "canary": 0, "canary_available": 0, "want_stable": 0,
     "want_canary": 4},
    {"name": "promote full still honors maxSurge/maxUnavailable",
     "promote_full": True, "replicas": 4, "weight": 1, "surge": 3, "unavailable": 0,
     "stable": 4, "stable_available": 4, "canary": 0, "canary_available": 0, "want_stable": 4,
     "want_canary": 3},
    {"name": "aborted with abortScaleDownDelaySeconds:0 and setCanaryScale",
     "replicas": 1, "set_canary_scale": {"replicas": 1}, "traffic_routing": True,
     "abort_delay": 0, "abort": True, "stable": 1, "stable_available": 1, "canary": 1,
     "canary_available": 1, "want_stable": 1, "want_canary": 1},
    {"name": "aborted with abortScaleDownDelaySeconds>0 and setCanaryScale",
     "replicas": 1, "set_canary_scale": {"replicas": 1}, "traffic_routing": True,
     "abort_delay": 30, "abort": True, "stable": 1, "stable_available": 1, "canary": 1,
     "canary_available": 1, "want_stable": 1, "want_canary": 0},
    {"name": "Honor MinPodsPerReplicaSet when using trafficRouting and starting canary",
     "replicas": 10, "weight": 5, "stable": 10, "stable_available": 10, "canary": 0,
     "canary_available": 0, "traffic_routing": True, "min_pods": 2, "want_stable": 10,
     "want_canary": 2},
    {"name": "Cap MinPodsPerReplicaSet when it exceeds rollout replicas with trafficRouting",
     "replicas": 1, "weight": 100, "promote_full": True, "stable": 1, "stable_available": 1,
     "canary": 0, "canary_available": 0, "traffic_routing": True, "min_pods": 2,
     "want_stable": 1, "want_canary": 1},
]

# TestApproximateWeightedNewStableReplicaCounts: (replicas, weight, maxWeight, maxSurge,
# canary, stable).
UPSTREAM_APPROXIMATIONS = [
    (0, 0, 100, 0, 0, 0),
    (0, 50, 100, 0, 0, 0),
    (0, 100, 100, 0, 0, 0),
    (0, 0, 100, 1, 0, 0),
    (0, 50, 100, 1, 0, 0),
    (0, 100, 100, 1, 0, 0),
    (1, 0, 100, 0, 0, 1),
    (1, 1, 100, 0, 0, 1),
    (1, 49, 100, 0, 0, 1),
    (1, 50, 100, 0, 1, 0),
    (1, 99, 100, 0, 1, 0),
    (1, 100, 100, 0, 1, 0),
    (1, 0, 100, 1, 0, 1),
    (1, 1, 100, 1, 1, 1),
    (1, 49, 100, 1, 1, 1),
    (1, 50, 100, 1, 1, 1),
    (1, 99, 100, 1, 1, 1),
    (1, 100, 100, 1, 1, 0),
    (2, 0, 100, 0, 0, 2),
    (2, 1, 100, 0, 1, 1),
    (2, 50, 100, 0, 1, 1),
    (2, 99, 100, 0, 1, 1),
    (2, 100, 100, 0, 2, 0),
    (2, 0, 100, 1, 0, 2),
    (2, 1, 100, 1, 1, 2),
    (2, 50, 100, 1, 1, 1),
    (2, 99, 100, 1, 2, 1),
    (2, 100, 100, 1, 2, 0),
    (3, 10, 100, 0, 1, 2),
    (3, 25, 100, 0, 1, 2),
    (3, 33, 100, 0, 1, 2),
    (3, 34, 100, 0, 1, 2),
    (3, 49, 100, 0, 1, 2),
    (3, 50, 100, 0, 2, 1),
    (3, 10, 100, 1, 1, 3),
    (3, 25, 100, 1, 1, 3),
    (3, 33, 100, 1, 1, 2),
    (3, 34, 100, 1, 1, 2),
    (3, 49, 100, 1, 2, 2),
    (3, 50, 100, 1, 2, 2),
    (10, 0, 100, 1, 0, 10),
    (10, 1, 100, 0, 1, 9),
    (10, 14, 100, 0, 1, 9),
    (10, 15, 100, 0, 2, 8),
    (10, 16, 100, 0, 2, 8),
    (10, 99, 100, 0, 9, 1),
    (10, 100, 100, 1, 10, 0),
    (10, 0, 100, 1, 0, 10),
    (10, 1, 100, 1, 1, 10),
    (10, 18, 100, 1, 2, 9),
    (10, 19, 100, 1, 2, 9),
    (10, 20, 100, 1, 2, 8),
    (10, 23, 100, 1, 2, 8),
    (10, 24, 100, 1, 3, 8),
    (10, 25, 100, 1, 3, 8),
    (10, 99, 100, 1, 10, 1),
    (10, 100, 100, 1, 10, 0),]


def _go_test_rollout(case: dict[str, Any]) -> dict[str, Any]:
    """canary_test.go `newRollout` with the case's fields."""
    step: dict[str, Any] = {"setWeight": case.get("weight", 0)}
    if case.get("set_canary_scale"):
        step["setCanaryScale"] = case["set_canary_scale"]
    canary: dict[str, Any] = {"maxSurge": case.get("surge", 0),
                              "maxUnavailable": case.get("unavailable", 0), "steps": [step]}
    if case.get("traffic_routing"):
        canary["trafficRouting"] = {}
    for key, field in (("abort_delay", "abortScaleDownDelaySeconds"),
                       ("min_pods", "minPodsPerReplicaSet")):
        if case.get(key) is not None:
            canary[field] = case[key]
    return {"kind": "Rollout",
            "spec": {"replicas": case["replicas"], "strategy": {"canary": canary}},
            "status": {"currentPodHash": "canary", "stableRS": "stable",
                       "promoteFull": case.get("promote_full", False),
                       "abort": case.get("abort", False)}}


@pytest.mark.parametrize("case", UPSTREAM_CANARY_CASES, ids=lambda case: case["name"])
def test_canary_counts_match_the_upstream_table(case):
    rollout = _go_test_rollout(case)
    if case.get("traffic_routing"):  # the Go test passes no ReplicaSets and no weights
        got = traffic_routed_counts(rollout, None, None)
    else:
        stable = Counted("stable", "stable", case["stable"], case.get("stable_available", 0))
        canary = Counted("canary", "canary", case.get("canary", 0),
                         case.get("canary_available", 0))
        older = [Counted("older", "older", *case["older"])] if case.get("older") else []
        got = basic_canary_counts(rollout, canary, stable, older)
    assert got == (case["want_canary"], case["want_stable"])


@pytest.mark.parametrize(("replicas", "weight", "maximum", "surge", "canary", "stable"),
                         UPSTREAM_APPROXIMATIONS)
def test_weighted_split_matches_the_upstream_table(replicas, weight, maximum, surge, canary,
                                                   stable):
    assert approximate_counts(replicas, weight, maximum, surge) == (canary, stable)


# TestCalculateReplicaCountsForCanaryTrafficRoutingDynamicScale: (name, replicas, setWeight,
# abort, extra setWeight step, canary/stable traffic weight, canary RS, stable RS and its
# available pods, expected canary and stable).
DYNAMIC_CASES = [
    ("next expected canary downscale step on abort", 10, 20, True, 60, 60, 40, 6, (4, 4), 6, 8),
    ("available canary below expected on abort", 10, 20, True, 60, 60, 40, 1, (4, 4), 6, 8),
    ("available stable on abort", 10, 20, True, 60, 60, 40, 2, (8, 4), 6, 8),
    ("no ReplicaSets on abort", 10, 20, True, 60, 60, 40, 0, (0, 0), 6, 10),
    ("scale down stable", 10, 10, False, None, 10, 90, 0, (0, 0), 1, 9),
    ("desired canary above actual", 10, 20, False, None, 10, 90, 0, (0, 0), 2, 9),
    ("canary kept while it has traffic on abort", 10, 20, True, None, 20, 80, 0, (0, 0), 2, 10),
    ("canary reduced with less traffic on abort", 10, 20, True, None, 10, 90, 0, (0, 0), 1, 10),
]


@pytest.mark.parametrize(("name", "replicas", "set_weight", "abort", "extra_step", "canary_weight",
                          "stable_weight", "canary_rs", "stable_rs", "want_canary",
                          "want_stable"), DYNAMIC_CASES, ids=[c[0] for c in DYNAMIC_CASES])
def test_dynamic_stable_scale_matches_the_upstream_table(
        name, replicas, set_weight, abort, extra_step, canary_weight, stable_weight, canary_rs,
        stable_rs, want_canary, want_stable):
    steps = [{"setWeight": set_weight}] + ([{"setWeight": extra_step}] if extra_step else [])
    rollout = {"kind": "Rollout", "spec": {"replicas": replicas, "strategy": {"canary": {
        "maxSurge": 0, "maxUnavailable": 1, "steps": steps, "trafficRouting": {},
        "dynamicStableScale": True}}},
        "status": {"currentPodHash": "canary", "stableRS": "stable", "abort": abort,
                   "canary": {"weights": {"canary": {"weight": canary_weight},
                                          "stable": {"weight": stable_weight}}}}}
    # The Go test passes nil for a ReplicaSet of 0, and the canary's spec as available.
    canary = Counted("canary", "canary", canary_rs, canary_rs) if canary_rs else None
    stable = Counted("stable", "stable", *stable_rs) if stable_rs[0] else None
    assert traffic_routed_counts(rollout, canary, stable) == (want_canary, want_stable)


# --- predictions from the objects the controller writes -----------------------------------


def _names(pods: list[Any]) -> list[str]:
    return sorted(p.name for p in pods)


def _pods(rs: dict[str, Any], prefix: str, nodes: list[str], costs: list[str | None] | None = None,
          ready: list[bool] | None = None) -> list[dict[str, Any]]:
    return [f.pod(f"{prefix}-{i}", owner=rs, node_name=node,
                  cost=(costs or [None] * len(nodes))[i],
                  ready=(ready or [True] * len(nodes))[i],
                  ready_time=f"2026-01-01T00:00:{i:02d}Z")
            for i, node in enumerate(nodes)]


def _order(pods: list[Any] | None) -> list[str] | None:
    return None if pods is None else [p.name for p in pods]


PLACES = st.tuples(st.sampled_from(["inf-1", "inf-2", "hyb-1", "hyb-2"]),
                   st.sampled_from([None, "1000", "-100", "0"]))


@settings(max_examples=80, deadline=None)
@given(placements=st.lists(PLACES, min_size=1, max_size=8),
       kind=st.sampled_from(["canary", "trafficRouting", "blueGreen"]), data=st.data())
def test_steady_state_scales_like_a_deployment(placements, kind, data):
    """One ReplicaSet, new and stable at once, all pods available: the new count goes to
    it, and its ReplicaSet picks the same victims as a Deployment's would."""
    to = data.draw(st.integers(0, len(placements)))
    nodes, costs = [p[0] for p in placements], [p[1] for p in placements]
    strategy = {"blueGreen": {"blue_green": {"activeService": "web"}},
                "trafficRouting": {"canary": {"trafficRouting": {"nginx": {}}}},
                "canary": {"canary": {"steps": [{"setWeight": 20}]}}}[kind]
    rollout = ro.rollout("web", len(placements), current="abc", stable="abc",
                         status={"blueGreen": {"activeSelector": "abc"}}, **strategy)
    rs = ro.replicaset(rollout, "abc", len(placements), revision=1)
    deployment = f.deployment("web", replicas=len(placements))
    drs = f.replicaset("web-abc", replicas=len(placements), owner=deployment, pod_hash="abc")
    by_rollout = Snapshot([rollout, rs, *NODES, *_pods(rs, "web", nodes, costs)])
    by_deployment = Snapshot([deployment, drs, *NODES, *_pods(drs, "web", nodes, costs)])
    mine = predict_scale(by_rollout, rollout, to, NOW)
    theirs = predict_scale(by_deployment, deployment, to, NOW)
    assert [p.name for p in mine.victims] == [p.name for p in theirs.victims]
    assert _names(mine.possible_victims) == _names(theirs.possible_victims)
    assert list(mine.child_targets.values()) == list(theirs.child_targets.values())
    assert _order(mine.prefix_order) == _order(theirs.prefix_order)
    judged = assess_scale(by_rollout, POLICY, rollout, to, NOW).verdict
    expected = assess_scale(by_deployment, POLICY, deployment, to, NOW).verdict
    assert (judged.allowed, judged.safe_replicas) == (expected.allowed, expected.safe_replicas)
    assert [v.rule for v in judged.violations] == [v.rule for v in expected.violations]


def test_steady_state_with_unavailable_pods_dips_below_the_new_count():
    """rollout/replicaset.go reconcileNewReplicaSet -> NewRSNewReplicas ->
    CalculateReplicaCountsForBasicCanary with new = stable (GetStableRS returns the new
    ReplicaSet): 12 -> 10, maxSurge 0, maxUnavailable 1, 6 of 12 available. The new
    ReplicaSet goes to max(10, 12 - 9) = 10, then adjustReplicaWithinLimits counts the
    same ReplicaSet again as the stable one at 0 with 6 available: 3 more needed for
    minAvailable 9, over maxSurge by 3, so 10 - 3 = 7. The next sync scales back up to 10,
    but 5 pods are gone by then (not-ready ones first)."""
    rollout = ro.rollout("web", 12, canary={"maxSurge": 0, "maxUnavailable": 1},
                         current="v1", stable="v1")
    rs = ro.replicaset(rollout, "v1", 12, revision=1, available=6)
    pods = _pods(rs, "p", ["hyb-1", "hyb-2", "inf-1"] * 4, ready=[i % 2 == 0 for i in range(12)])
    prediction = predict_scale(Snapshot([rollout, rs, *NODES, *pods]), rollout, 10, NOW)
    assert prediction.child_targets == {"web-v1": (12, 7)}
    assert len(prediction.victims) == 5
    assert all(not p.ready for p in prediction.victims)
    assert prediction.prefix_order is None  # a smaller count need not delete a prefix
    assert any("takes web-v1 down to 7 before it scales it back up to 10" in note
               for note in prediction.notes)


def test_basic_canary_splits_the_new_count_as_the_controller_syncs():
    """10 -> 5 at setWeight 20 (canary 2, stable 8; maxSurge and maxUnavailable 25%,
    i.e. 2 and 1 at 5 replicas). Sync 1 (reconcileCanaryStableReplicaSet): desired 1/4;
    not increasing (1 < 2), so 10 - 4 = 6 may go: canary max(1, 2 - 6) = 1, and
    adjustReplicaWithinLimits trims the stable by the 2 over maxSurge: 8 -> 6. Sync 2:
    stable stays 6, the new ReplicaSet goes to 1. Sync 3: increasing now, 7 - 4 = 3 may
    go: stable max(4, 6 - 3) = 4."""
    rollout = ro.rollout("web", 10, canary={"steps": [{"setWeight": 20}, {"pause": {}}]},
                         current="v2", stable="v1", step=1)
    stable = ro.replicaset(rollout, "v1", 8, revision=1)
    canary = ro.replicaset(rollout, "v2", 2, revision=2)
    pods = (_pods(stable, "s", ["hyb-1", "hyb-2"] * 4, ["-100"] * 8)
            + _pods(canary, "c", ["inf-1", "inf-2"], ["1000"] * 2))
    view = Snapshot([rollout, stable, canary, *NODES, *pods])
    prediction = predict_scale(view, rollout, 5, NOW)
    assert prediction.child_targets == {"web-v1": (8, 4), "web-v2": (2, 1)}
    assert sum(p.replica_set == "web-v1" for p in prediction.victims) == 4
    assert sum(p.replica_set == "web-v2" for p in prediction.victims) == 1
    assert any("splits the new count as web-v1 4, web-v2 1" in n for n in prediction.notes)
    # The canary's only pods run on the inference pool: the split forces one of them out
    # while hybrid stable pods survive.
    verdict = assess_scale(view, POLICY, rollout, 5, NOW).verdict
    assert not verdict.allowed
    assert [v.rule for v in verdict.violations] == ["protectedLast"]
    assert verdict.safe_replicas is not None and verdict.safe_replicas > 5


def _traffic_routed(dynamic: bool) -> tuple[Snapshot, dict[str, Any]]:
    canary = {"trafficRouting": {"nginx": {"stableIngress": "web"}},
              "steps": [{"setWeight": 50}, {"pause": {}}], "dynamicStableScale": dynamic}
    rollout = ro.rollout("web", 4, canary=canary, current="v2", stable="v1", step=1, status={
        "canary": {"weights": {"canary": {"weight": 50, "podTemplateHash": "v2"},
                               "stable": {"weight": 50, "podTemplateHash": "v1"}}}})
    stable = ro.replicaset(rollout, "v1", 2 if dynamic else 4, revision=1)
    new = ro.replicaset(rollout, "v2", 2, revision=2)
    hybrid = ["hyb-1", "hyb-2"] * 2
    pods = (_pods(stable, "s", hybrid[: 2 if dynamic else 4], ["-100"] * 4)
            + _pods(new, "c", ["inf-1", "inf-2"], ["1000"] * 2))
    return Snapshot([rollout, stable, new, *NODES, *pods]), rollout


def test_traffic_routed_canary_keeps_the_stable_at_full_size():
    """CalculateReplicaCountsForTrafficRoutedCanary without dynamicStableScale: stable
    = spec.replicas, canary = ceil(50% of 2) = 1."""
    view, rollout = _traffic_routed(dynamic=False)
    prediction = predict_scale(view, rollout, 2, NOW)
    assert prediction.child_targets == {"web-v1": (4, 2), "web-v2": (2, 1)}
    verdict = assess_scale(view, POLICY, rollout, 2, NOW).verdict
    (violation,) = verdict.violations
    assert violation.rule == "protectedLast" and "pool inference" in violation.message
    assert "fix:" in violation.message and "deletion cost" in violation.message
    assert verdict.safe_replicas == 3  # ceil(50% of 3) = 2 canary pods


def test_dynamic_stable_scale_follows_the_traffic_weight():
    """With dynamicStableScale the stable gets max(ceil((100 - 50)% of 2),
    ceil(50% (status stable weight) of 2)) = 1."""
    view, rollout = _traffic_routed(dynamic=True)
    prediction = predict_scale(view, rollout, 2, NOW)
    assert prediction.child_targets == {"web-v1": (2, 1), "web-v2": (2, 1)}


def test_clamp_lowers_an_autoscaler_to_the_safe_count():
    view, rollout = _traffic_routed(dynamic=False)
    clamp = clamp_scale_down(view, POLICY, rollout, 2, 4, NOW)
    assert (clamp.kind, clamp.replicas) == ("Rollout", 3)
    assert "Rollout ml/web" in clamp.reason()


def _blue_green(deadline: str | None, **blue_green: Any) -> tuple[Snapshot, dict[str, Any]]:
    """After promotion: v2 active and stable, v1 (the previous active) kept up until its
    scale-down deadline."""
    rollout = ro.rollout("web", 4, blue_green={"activeService": "web", **blue_green},
                         current="v2", stable="v2",
                         status={"blueGreen": {"activeSelector": "v2"}})
    old = ro.replicaset(rollout, "v1", 4, revision=1, deadline=deadline)
    new = ro.replicaset(rollout, "v2", 4, revision=2)
    pods = (_pods(old, "old", ["inf-1", "inf-2", "hyb-1", "hyb-2"],
                  ["1000", "1000", "-100", "-100"])
            + _pods(new, "new", ["hyb-1", "hyb-2", "hyb-1", "hyb-2"], ["-100"] * 4))
    return Snapshot([rollout, old, new, *NODES, *pods]), rollout


def test_blue_green_old_replicaset_within_its_delay_follows_the_new_count():
    """scaleDownOldReplicaSetsForBlueGreen -> scaleDownDelayHelper: before its deadline
    an old ReplicaSet gets rolloutReplicas, the new spec.replicas."""
    view, rollout = _blue_green("2026-03-01T00:10:00Z")
    prediction = predict_scale(view, rollout, 2, NOW)
    assert prediction.child_targets == {"web-v1": (4, 2), "web-v2": (4, 2)}
    old = [p for p in prediction.victims if p.replica_set == "web-v1"]
    assert _names(old) == ["old-2", "old-3"]  # the hybrid ones: lower deletion cost
    # the new ReplicaSet's pods tie (same cost, 3 pods of the Rollout on either node)
    assert {p.replica_set for p in prediction.possible_victims} == {"web-v2"}


def test_blue_green_old_replicaset_past_its_delay_goes_to_zero():
    view, rollout = _blue_green("2026-02-28T23:59:00Z")
    prediction = predict_scale(view, rollout, 2, NOW)
    assert prediction.child_targets == {"web-v1": (4, 0), "web-v2": (4, 2)}


def test_a_deadline_about_to_pass_makes_the_old_pods_possible_victims():
    view, rollout = _blue_green("2026-03-01T00:00:05Z")
    prediction = predict_scale(view, rollout, 2, NOW)
    assert prediction.child_targets == {"web-v1": (4, 2), "web-v2": (4, 2)}
    assert _names([p for p in prediction.possible_victims
                   if p.replica_set == "web-v1"]) == ["old-0", "old-1"]
    (group,) = [g for g in prediction.tie_groups if g.why]
    assert "deadline" in group.why
    verdict = assess_scale(view, POLICY, rollout, 2, NOW).verdict
    assert not verdict.allowed and "may delete" in verdict.violations[0].message


def test_blue_green_preview_keeps_its_preview_replica_count():
    """NewRSNewReplicas: before promotion (paused, active v1) the preview ReplicaSet
    keeps previewReplicaCount; the active (stable) one gets the new count."""
    rollout = ro.rollout("web", 4, blue_green={"activeService": "web", "previewReplicaCount": 1},
                         current="v2", stable="v1", status={
                             "blueGreen": {"activeSelector": "v1", "previewSelector": "v2"},
                             "pauseConditions": [{"reason": "BlueGreenPause"}]})
    active = ro.replicaset(rollout, "v1", 4, revision=1)
    preview = ro.replicaset(rollout, "v2", 1, revision=2)
    pods = _pods(active, "a", ["hyb-1", "hyb-2"] * 2) + _pods(preview, "p", ["inf-1"])
    prediction = predict_scale(Snapshot([rollout, active, preview, *NODES, *pods]), rollout, 2,
                               NOW)
    assert prediction.child_targets == {"web-v1": (4, 2), "web-v2": (1, 1)}


def test_a_paused_canary_is_predicted_as_it_scales_on_resume():
    rollout = ro.rollout("web", 10, canary={"steps": [{"setWeight": 20}, {"pause": {}}]},
                         current="v2", stable="v1", step=1)
    rollout["spec"]["paused"] = True
    stable = ro.replicaset(rollout, "v1", 8, revision=1)
    canary = ro.replicaset(rollout, "v2", 2, revision=2)
    pods = _pods(stable, "s", ["hyb-1"] * 8) + _pods(canary, "c", ["hyb-2"] * 2)
    prediction = predict_scale(Snapshot([rollout, stable, canary, *NODES, *pods]), rollout, 5,
                               NOW)
    assert prediction.child_targets == {"web-v1": (8, 4), "web-v2": (2, 1)}
    assert any("paused" in note and "resumes" in note for note in prediction.notes)


@pytest.mark.parametrize("change", ["unrecorded new ReplicaSet", "unobserved generation",
                                    "aborted with a delay", "unobserved workload template"])
def test_what_is_not_modelled_makes_every_pod_a_possible_victim(change):
    status: dict[str, Any] = {"canary": {"weights": {"canary": {"weight": 50},
                                                     "stable": {"weight": 50}}}}
    current = "v3" if change == "unrecorded new ReplicaSet" else "v2"
    if change == "aborted with a delay":
        status["abort"] = True
    rollout = ro.rollout("web", 4, current=current, stable="v1", step=1, status=status, canary={
        "trafficRouting": {"nginx": {}}, "steps": [{"setWeight": 50}, {"pause": {}}]})
    if change == "unobserved generation":
        rollout["metadata"]["generation"] = 2
    if change == "unobserved workload template":  # rollout/sync.go persistRolloutStatus
        rollout["spec"]["workloadRef"] = {"kind": "Deployment", "name": "web"}
        rollout["metadata"]["annotations"] = {"rollout.argoproj.io/workload-generation": "3"}
        rollout["status"]["workloadObservedGeneration"] = "2"
    stable = ro.replicaset(rollout, "v1", 4, revision=1)
    canary = ro.replicaset(rollout, "v2", 2, revision=2)
    pods = (_pods(stable, "s", ["hyb-1", "hyb-2"] * 2, ["-100"] * 4)
            + _pods(canary, "c", ["inf-1", "inf-2"], ["1000"] * 2))
    view = Snapshot([rollout, stable, canary, *NODES, *pods])
    prediction = predict_scale(view, rollout, 3, NOW)
    assert _names(prediction.victims + prediction.possible_victims) == _names(
        prediction.victims + prediction.survivors)
    assert any(note.startswith("not modelled: ") for note in prediction.notes)
    (group,) = prediction.tie_groups
    assert group.removed == 3  # 6 pods, 3 replicas
    assert not assess_scale(view, POLICY, rollout, 3, NOW).verdict.allowed


def test_workload_ref_rollout_reads_the_replicasets_it_owns():
    """A Rollout with workloadRef has no template or selector of its own; the
    controller resolves them from the Deployment (rollout/templateref.go)."""
    source = f.deployment("web", replicas=0)
    rollout = ro.rollout("web", 3, current="v1", stable="v1")
    del rollout["spec"]["template"], rollout["spec"]["selector"]
    rollout["spec"]["workloadRef"] = {"apiVersion": "apps/v1", "kind": "Deployment",
                                      "name": "web"}
    rs = ro.replicaset(rollout | {"spec": {**rollout["spec"], "selector": {
        "matchLabels": {"app": "web"}}}}, "v1", 3, revision=1)
    pods = _pods(rs, "w", ["hyb-1", "inf-1", "inf-1"], [None, "1000", "1000"])
    prediction = predict_scale(Snapshot([source, rollout, rs, *NODES, *pods]), rollout, 2, NOW)
    assert prediction.child_targets == {"web-v1": (3, 2)}
    assert _names(prediction.victims) == ["w-0"]
    assert any("workloadRef" in note for note in prediction.notes)


def test_a_rollout_prediction_is_a_scale_prediction():
    view, rollout = _blue_green("2026-03-01T00:10:00Z")
    prediction = predict_scale(view, rollout, 4, NOW)
    assert isinstance(prediction, ScalePrediction)
    assert (prediction.kind, prediction.from_replicas, prediction.to_replicas) == ("Rollout", 4, 4)
    assert not prediction.victims


def test_workload_ref_rollout_is_judged_by_the_referenced_template_labels():
    """The policy's podSelector matches the pod template, which a workloadRef Rollout
    takes from its Deployment: without reading it the Rollout would be out of scope."""
    source = f.deployment("web", replicas=0)
    rollout = ro.rollout("web", 3, current="v1", stable="v1")
    del rollout["spec"]["template"]
    rollout["spec"]["workloadRef"] = {"apiVersion": "apps/v1", "kind": "Deployment",
                                      "name": "web"}
    rs = ro.replicaset(rollout, "v1", 3, revision=1)
    pods = _pods(rs, "w", ["inf-1", "inf-1", "hyb-1"])
    view = Snapshot([source, rollout, rs, *NODES, *pods])
    policy = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000,
                                      "protected": True}],
                           "podSelector": {"matchLabels": {"app": "web"}}})
    decision = decide_scale(view, policy, rollout, 1, NOW)
    assert decision.out_of_scope is None
    assert decision.assessment is not None and not decision.assessment.verdict.allowed
    rollout["spec"]["workloadRef"]["name"] = "gone"
    assert "podSelector" in (decide_scale(view, policy, rollout, 1, NOW).out_of_scope or "")


def test_possible_victims_alone_are_judged():
    """No pod goes for sure, but an old ReplicaSet whose deadline is about to pass may
    go to 0 now: the verdict judges that worst case."""
    view, rollout = _blue_green("2026-03-01T00:00:05Z")
    prediction = predict_scale(view, rollout, 4, NOW)
    assert not prediction.victims
    assert _names(prediction.possible_victims) == ["old-0", "old-1", "old-2", "old-3"]
    verdict = assess_scale(view, POLICY, rollout, 4, NOW).verdict
    assert not verdict.allowed
    message = verdict.violations[0].message
    assert message.startswith("may delete protected-pool pods old-")
    assert "old-0 (node inf-1, pool inference)" in message and "old-1 (node inf-2" in message


def test_a_replicaset_set_down_in_two_syncs_may_rank_twice():
    """10 -> 5 at setWeight 20 sets the stable ReplicaSet to 6, then to 4 (see the split
    above). If its ReplicaSet controller syncs in between, it deletes 2 of the 4 pods on
    hyb-1 (rank 4) and ranks again: then every node holds 2 and any pod may go; in one
    sync the 4 pods on hyb-1 go. Both are possible."""
    rollout = ro.rollout("web", 10, canary={"steps": [{"setWeight": 20}, {"pause": {}}]},
                         current="v2", stable="v1", step=1)
    stable = ro.replicaset(rollout, "v1", 8, revision=1)
    canary = ro.replicaset(rollout, "v2", 2, revision=2)
    pods = (_pods(stable, "s", ["hyb-1"] * 4 + ["inf-1"] * 2 + ["inf-2"] * 2)
            + _pods(canary, "c", ["hyb-2", "hyb-2"]))
    view = Snapshot([rollout, stable, canary, *NODES, *pods])
    prediction = predict_scale(view, rollout, 5, NOW)
    stable_victims = [p for p in prediction.victims if p.replica_set == "web-v1"]
    assert {p.node_name for p in stable_victims} == {"hyb-1"}
    assert {p.node_name for p in prediction.possible_victims} >= {"inf-1", "inf-2"}
    assert not assess_scale(view, POLICY, rollout, 5, NOW).verdict.allowed


def test_pods_coming_up_later_may_take_the_stable_further_down():
    """4 -> 3 at setWeight 75 (maxSurge and maxUnavailable 25%: 1 and 0 at 3 replicas):
    approximateWeightedCanaryStableReplicaCounts picks canary 3 of 4 (exactly 75%), so
    stable 1. With the canary's unready pod the stable can only go to 2 now (minAvailable
    3); once that pod is up, the next sync takes it to 1. Either may happen."""
    rollout = ro.rollout("web", 4, canary={"maxSurge": "25%", "maxUnavailable": "25%",
                                           "steps": [{"setWeight": 75}, {"pause": {}}]},
                         current="v2", stable="v1", step=1)
    stable = ro.replicaset(rollout, "v1", 3, revision=1)
    canary = ro.replicaset(rollout, "v2", 2, revision=2, available=1)
    pods = (_pods(stable, "s", ["hyb-1", "inf-1", "inf-2"], ["-100", "1000", "1000"])
            + _pods(canary, "c", ["hyb-2", "hyb-2"], ready=[True, False]))
    view = Snapshot([rollout, stable, canary, *NODES, *pods])
    prediction = predict_scale(view, rollout, 3, NOW)
    assert prediction.child_targets == {"web-v1": (3, 2), "web-v2": (2, 2)}
    assert _names(prediction.victims) == ["s-0"]
    (group,) = [g for g in prediction.tie_groups if g.why]
    assert (_names(group.members), group.removed) == (["s-1", "s-2"], 1)
    assert "new pods up or not" in (group.why or "")
    verdict = assess_scale(view, POLICY, rollout, 3, NOW).verdict
    assert [v.rule for v in verdict.violations] == ["protectedLast"]


@settings(max_examples=60, deadline=None)
@given(replicas=st.integers(1, 8), weight=st.sampled_from([10, 25, 50, 75, 90]),
       fences=st.sampled_from([(0, 1), (1, 0), (1, 1), ("25%", "25%"), (2, "50%")]),
       sizes=st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(0, 3)),
       data=st.data())
def test_every_order_of_availability_changes_is_covered(replicas, weight, fences, sizes,
                                                        data):
    """A random walk of syncs and availability changes (victims gone, pods up) never
    takes a ReplicaSet below the lowest size the search reports."""
    rollout = {"spec": {"replicas": data.draw(st.integers(0, replicas)), "strategy": {
        "canary": {"maxSurge": fences[0], "maxUnavailable": fences[1],
                   "steps": [{"setWeight": weight}, {"pause": {}}]}}},
        "status": {"currentPodHash": "v2", "stableRS": "v1", "currentStepIndex": 1}}
    states = [Tracked(name, name, size, data.draw(st.integers(0, size)), str(revision),
                      revision, lowest=size)
              for revision, (name, size) in enumerate(zip(("v1", "v2", "v0"), sizes,
                                                          strict=True))]
    ready = {rs.name: rs.available for rs in states}

    def fresh(name: str, size: int) -> int:
        return min(size, ready[name])

    least = reachable_lowest(rollout, states, "v2", "v1", Variant(False, True), fresh)
    assert least is not None
    walk = {rs.name: replace(rs) for rs in states}
    for move in data.draw(st.lists(st.tuples(st.sampled_from(["sync", "gone", "up"]),
                                             st.sampled_from(["v1", "v2", "v0"])),
                                   max_size=20)):
        rs = walk[move[1]]
        if move[0] == "sync":
            sync_once(rollout, walk, "v2", "v1", Variant(False, True))
        elif move[0] == "gone":
            rs.available = min(rs.available, fresh(rs.name, rs.lowest))
        else:
            rs.available = rs.replicas
        assert all(walk[name].lowest >= least[name] for name in walk)


def test_an_abandoned_intermediate_replicaset_drains_first():
    """v1 stable (2), v2 an update abandoned for v3 (1), v3 new (1), setWeight 50; 4 -> 2
    (maxSurge 1, maxUnavailable 0 at 2). CalculateReplicaCountsForBasicCanary returns
    early while an older ReplicaSet has replicas; scaleDownOldReplicaSetsForCanary takes
    v2 to 0 (4 available, minAvailable 2). The next sync splits 1/1 (50% of 2) and,
    increasing, scales the stable down by 3 - 2 = 1. v2 would drain without the scale
    too (minAvailable 3 at 4 replicas leaves 1 to go): a note says so."""
    rollout = ro.rollout("web", 4, canary={"steps": [{"setWeight": 50}, {"pause": {}}]},
                         current="v3", stable="v1", step=1)
    stable = ro.replicaset(rollout, "v1", 2, revision=1)
    abandoned = ro.replicaset(rollout, "v2", 1, revision=2)
    new = ro.replicaset(rollout, "v3", 1, revision=3)
    pods = (_pods(stable, "s", ["hyb-1", "hyb-2"]) + _pods(abandoned, "a", ["inf-1"])
            + _pods(new, "n", ["inf-2"]))
    prediction = predict_scale(Snapshot([rollout, stable, abandoned, new, *NODES, *pods]),
                               rollout, 2, NOW)
    assert prediction.child_targets == {"web-v1": (2, 1), "web-v2": (1, 0),
                                              "web-v3": (1, 1)}
    assert any("still moving" in note and "web-v2" in note for note in prediction.notes)


def test_blue_green_keeps_only_the_newest_old_replicasets_within_the_revision_limit():
    """scaleDownDelayHelper with scaleDownDelayRevisionLimit 1: old ReplicaSets newest
    revision first; the first within its deadline follows the new count, the next is
    beyond the limit and goes to 0."""
    rollout = ro.rollout("web", 4, blue_green={"activeService": "web",
                                               "scaleDownDelayRevisionLimit": 1},
                         current="v3", stable="v3",
                         status={"blueGreen": {"activeSelector": "v3"}})
    later = "2026-03-01T00:10:00Z"
    oldest = ro.replicaset(rollout, "v1", 4, revision=1, deadline=later)
    older = ro.replicaset(rollout, "v2", 4, revision=2, deadline=later)
    active = ro.replicaset(rollout, "v3", 4, revision=3)
    pods = [pod for rs, prefix in ((oldest, "a"), (older, "b"), (active, "c"))
            for pod in _pods(rs, prefix, ["hyb-1", "hyb-2"] * 2)]
    prediction = predict_scale(Snapshot([rollout, oldest, older, active, *NODES, *pods]),
                               rollout, 2, NOW)
    assert prediction.child_targets == {"web-v1": (4, 0), "web-v2": (4, 2),
                                              "web-v3": (4, 2)}
