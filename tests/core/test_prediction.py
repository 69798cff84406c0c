"""Scale-down prediction for Deployments, ReplicaSets and StatefulSets.

Upstream sources (kubernetes/kubernetes):
- pkg/controller/deployment/sync_test.go, TestScale (recent version: ktesting, ptr).
  Its harness annotates every ReplicaSet with SetReplicasAnnotations(rs,
  desired=old.spec.replicas, max=desired+MaxSurge(old)) and newDeployment() defaults
  maxSurge and maxUnavailable to 0.
- pkg/controller/deployment/util/deployment_util_test.go (recent version with
  DeploymentPodReplacementPolicy): TestGetReplicaSetFraction, TestResolveFenceposts,
  TestGetNonNegativeInt32FromAnnotation, TestFindNewReplicaSet, TestAnnotationUtils
  (IsSaturated), and TestMaxUnavailable, whose shape the max-surge table copies.
- pkg/controller/deployment/sync.go (scale) and util/deployment_util.go
  (GetReplicaSetProportion, getReplicaSetFraction, MaxSurge, ResolveFenceposts,
  IsSaturated, FindActiveOrLatest); k8s.io/utils/integer RoundToInt32 = math.Round.
- pkg/controller/statefulset/stateful_set_control.go and stateful_set_utils.go:
  condemned pods (ordinal outside [start, start+replicas-1]) go highest ordinal first;
  getParentNameAndOrdinal parses `(.*)-([0-9]+)$` with ParseInt(.., 10, 32).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import factories as f
from webhook.core.cluster import Snapshot
from webhook.core.kube import parse_time_ns
from webhook.core.prediction import (
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    find_new_replicaset,
    max_surge,
    non_negative_int32_annotation,
    predict_scale,
    replicaset_fraction,
    replicaset_proportion,
    replicaset_targets,
    resolve_fenceposts,
    round_half_away,
    scaled_int_or_percent,
    stateful_ordinal,
)

NOW = parse_time_ns("2026-03-15T12:00:00Z")
NEW_TS = "2016-05-20T02:00:00Z"  # newTimestamp
OLD_TS = "2016-05-20T01:00:00Z"  # oldTimestamp
OLDER_TS = "2016-05-20T00:00:00Z"  # olderTimestamp
NEW_IMAGE = "foo/bar"
OLD_IMAGE = "foo/bar:old"


# --- TestScale --------------------------------------------------------------------------


def scale_deployment(replicas: int, max_surge_value: Any = 0, max_unavailable: Any = 0,
                     image: str = NEW_IMAGE) -> dict[str, Any]:
    """newDeployment("foo", replicas, nil, maxSurge, maxUnavailable, ...)."""
    return f.deployment("foo", "default", replicas, image=image, max_surge=max_surge_value,
                        max_unavailable=max_unavailable)


# (name, deployment (replicas, surge), old deployment (replicas, surge),
#  new RS (name, size, ts) or None, old RSs [(name, size, ts)], expected sizes,
#  desiredReplicasAnnotations, extra: dict)
SCALE_CASES: list[tuple[Any, ...]] = [
    ("normal scaling event: 10 -> 12", (12, 0), (10, 0), ("foo-v1", 10, NEW_TS), [],
     {"foo-v1": 12}, {}, {}),
    ("normal scaling event: 10 -> 5", (5, 0), (10, 0), ("foo-v1", 10, NEW_TS), [],
     {"foo-v1": 5}, {}, {}),
    ("proportional scaling: 5 -> 10", (10, 0), (5, 0), ("foo-v2", 2, NEW_TS),
     [("foo-v1", 3, OLD_TS)], {"foo-v2": 4, "foo-v1": 6}, {}, {}),
    ("proportional scaling: 5 -> 3", (3, 0), (5, 0), ("foo-v2", 2, NEW_TS),
     [("foo-v1", 3, OLD_TS)], {"foo-v2": 1, "foo-v1": 2}, {}, {}),
    ("proportional scaling: 9 -> 4", (4, 0), (9, 0), ("foo-v2", 8, NEW_TS),
     [("foo-v1", 1, OLD_TS)], {"foo-v2": 4, "foo-v1": 0}, {}, {}),
    ("proportional scaling: 7 -> 10", (10, 0), (7, 0), ("foo-v3", 2, NEW_TS),
     [("foo-v2", 3, OLD_TS), ("foo-v1", 2, OLDER_TS)],
     {"foo-v3": 3, "foo-v2": 4, "foo-v1": 3}, {}, {}),
    ("proportional scaling: 13 -> 8", (8, 0), (13, 0), ("foo-v3", 2, NEW_TS),
     [("foo-v2", 8, OLD_TS), ("foo-v1", 3, OLDER_TS)],
     {"foo-v3": 1, "foo-v2": 5, "foo-v1": 2}, {}, {}),
    ("leftover distribution: 3 -> 4", (4, 0), (3, 0), ("foo-v3", 1, NEW_TS),
     [("foo-v2", 1, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     {"foo-v3": 2, "foo-v2": 1, "foo-v1": 1}, {}, {}),
    ("leftover distribution: 3 -> 2", (2, 0), (3, 0), ("foo-v3", 1, NEW_TS),
     [("foo-v2", 1, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     {"foo-v3": 1, "foo-v2": 1, "foo-v1": 0}, {}, {}),
    ("proportional scaling (no new rs): 4 -> 5", (5, 0), (4, 0), None,
     [("foo-v2", 2, OLD_TS), ("foo-v1", 2, OLDER_TS)], {"foo-v2": 3, "foo-v1": 2}, {}, {}),
    ("proportional scaling: 6 -> 0", (0, 0), (6, 0), ("foo-v3", 3, NEW_TS),
     [("foo-v2", 2, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     {"foo-v3": 0, "foo-v2": 0, "foo-v1": 0}, {}, {}),
    ("proportional scaling: 0 -> 6", (6, 0), (6, 0), ("foo-v3", 0, NEW_TS),
     [("foo-v2", 0, OLD_TS), ("foo-v1", 0, OLDER_TS)],
     {"foo-v3": 6, "foo-v2": 0, "foo-v1": 0}, {}, {}),
    ("failed rs update", (5, 0), (5, 0), ("foo-v3", 2, NEW_TS),
     [("foo-v2", 1, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     # Upstream drops the foo-v2 update (the fake client fails it) and expects 2 for
     # foo-v2 only because its replicas were bumped before the failure; the targets
     # computed by scale() are these.
     {"foo-v3": 2, "foo-v2": 2, "foo-v1": 1}, {"foo-v2": 3}, {}),
    ("deployment with surge pods", (20, 2), (10, 2), ("foo-v2", 6, NEW_TS),
     [("foo-v1", 6, OLD_TS)], {"foo-v2": 11, "foo-v1": 11}, {}, {}),
    ("change both surge and size", (50, 6), (10, 3), ("foo-v2", 5, NEW_TS),
     [("foo-v1", 8, OLD_TS)], {"foo-v2": 22, "foo-v1": 34}, {}, {}),
    ("change both size and template", (14, 0), (10, 0), None,
     [("foo-v2", 7, NEW_TS), ("foo-v1", 3, OLD_TS)], {"foo-v2": 10, "foo-v1": 4}, {},
     {"template_changed": True}),
    ("saturated but broken new replica set does not affect old pods", (2, 1, 1), (2, 1, 1),
     ("foo-v2", 2, NEW_TS), [("foo-v1", 1, OLD_TS)], {"foo-v2": 2, "foo-v1": 1}, {},
     {"new_available": 0}),
]


def _annotate(rs: dict[str, Any], desired: int, maximum: int) -> None:
    rs["metadata"].setdefault("annotations", {}).update({
        DESIRED_REPLICAS_ANNOTATION: str(desired), MAX_REPLICAS_ANNOTATION: str(maximum)})


@pytest.mark.parametrize("case", SCALE_CASES, ids=[c[0] for c in SCALE_CASES])
def test_scale(case):
    _, new_d, old_d, new_rs, old_rss, expected, desired_annotations, extra = case
    deployment = scale_deployment(*new_d)
    old_deployment = scale_deployment(*old_d)
    if extra.get("template_changed"):
        # updatedTemplate(): the Deployment's template differs from every ReplicaSet's.
        deployment["spec"]["template"]["metadata"]["labels"]["another"] = "label"
    replicasets = []
    specs = ([(*new_rs, NEW_IMAGE)] if new_rs else []) + [(*o, OLD_IMAGE) for o in old_rss]
    for name, size, created, image in specs:
        rs = f.replicaset(name, "default", size, owner=deployment, created=created,
                          image=image, pod_hash=name)
        desired = desired_annotations.get(name, old_deployment["spec"]["replicas"])
        _annotate(rs, desired, desired + max_surge(old_deployment))
        replicasets.append(rs)
    if "new_available" in extra:
        replicasets[0]["status"]["availableReplicas"] = extra["new_available"]
    # scale() reads the new spec.replicas and the old status.replicas.
    deployment["status"]["replicas"] = old_deployment["spec"]["replicas"]
    deployment["spec"]["replicas"] = old_deployment["spec"]["replicas"]
    targets = replicaset_targets(deployment, replicasets, new_d[0])
    sizes = {rs["metadata"]["name"]: targets.get(rs["metadata"]["name"], rs["spec"]["replicas"])
             for rs in replicasets}
    assert sizes == expected


def test_saturated_new_replicaset_scales_old_ones_to_zero():
    # IsSaturated (TestAnnotationUtils): replicas, desired annotation and available
    # replicas all equal the Deployment's; then scale() drains every active old RS.
    deployment = scale_deployment(3, 1, 0)
    new = f.replicaset("foo-new", "default", 3, owner=deployment, created=NEW_TS,
                       image=NEW_IMAGE, pod_hash="new")
    old = f.replicaset("foo-old", "default", 2, owner=deployment, created=OLD_TS,
                       image=OLD_IMAGE, pod_hash="old")
    _annotate(new, 3, 4)
    _annotate(old, 3, 4)
    assert replicaset_targets(deployment, [new, old], 3) == {"foo-old": 0}
    # Not saturated: proportional scaling instead. allowed 3+1, total 5, toAdd -1; both
    # fractions round to 0, so the leftover -1 lands on the largest RS (foo-new).
    new["status"]["availableReplicas"] = 2
    assert replicaset_targets(deployment, [new, old], 3) == {"foo-new": 2, "foo-old": 2}
    new["status"]["availableReplicas"] = 3
    new["metadata"]["annotations"][DESIRED_REPLICAS_ANNOTATION] = "+3"  # ParseUint rejects
    assert replicaset_targets(deployment, [new, old], 3) == {"foo-new": 2, "foo-old": 2}


def test_recreate_rollout_is_not_scaled_proportionally():
    deployment = f.deployment("foo", "default", 4, strategy="Recreate")
    new = f.replicaset("foo-new", "default", 2, owner=deployment, created=NEW_TS,
                       pod_hash="new")
    old = f.replicaset("foo-old", "default", 2, owner=deployment, created=OLD_TS,
                       image=OLD_IMAGE, pod_hash="old")
    notes: list[str] = []
    assert replicaset_targets(deployment, [new, old], 2, notes) == {}
    assert notes and "Recreate" in notes[0]


# --- TestGetReplicaSetFraction ----------------------------------------------------------

# (name, deploymentReplicas, deploymentStatusReplicas, deploymentMaxSurge, rsReplicas,
#  rsAnnotations, expectedFraction)
FRACTION_CASES = [
    ("empty deployment always scales to 0", 0, 0, 0, 10, None, -10),
    ("unsynced deployment does not scale when max-replicas annotation is missing "
     "(removed by a 3rd party)", 10, 0, 0, 5, None, 0),
    ("unsynced deployment does not scale when max-replicas annotation is incorrectly set "
     "to 0 (by a 3rd party)", 10, 0, 0, 5, {MAX_REPLICAS_ANNOTATION: "0"}, 0),
    ("scale up by 1/5 should increase RS replicas by 1/5 when max-replicas annotation is "
     "missing (removed by a 3rd party)", 120, 100, 0, 50, None, 10),
    ("scale up by 1/5 should increase RS replicas by 1/5 when max-replicas annotation is "
     "incorrectly set to 0 (by a 3rd party)", 120, 100, 0, 50,
     {MAX_REPLICAS_ANNOTATION: "0"}, 10),
    ("scale up by 1/5 should increase RS replicas by 1/5", 120, 0, 0, 50,
     {MAX_REPLICAS_ANNOTATION: "100"}, 10),
    ("scale up with maxSurge by 1/5 should increase RS replicas approximately by 1/5",
     120, 0, 10, 50, {MAX_REPLICAS_ANNOTATION: "110"}, 9),
    ("scale down by 1/6 should decrease RS replicas by 1/6", 10, 0, 0, 6,
     {MAX_REPLICAS_ANNOTATION: "12"}, -1),
    ("scale down with maxSurge by 1/6 should decrease RS replicas approximately by 1/6",
     100, 0, 10, 50, {MAX_REPLICAS_ANNOTATION: "130"}, -8),
]


@pytest.mark.parametrize(("replicas", "status_replicas", "surge", "rs_replicas",
                          "annotations", "expected"),
                         [c[1:] for c in FRACTION_CASES], ids=[c[0] for c in FRACTION_CASES])
def test_get_replicaset_fraction(replicas, status_replicas, surge, rs_replicas, annotations,
                                 expected):
    deployment = f.deployment("nginx", replicas=replicas, max_surge=surge, max_unavailable=1,
                              status_replicas=status_replicas)
    rs = f.replicaset("nginx-rs", replicas=rs_replicas, owner=deployment,
                      annotations=annotations)
    assert replicaset_fraction(rs, deployment) == expected


@pytest.mark.parametrize(("annotation", "expected"), [
    ("-12", 0),  # ParseUint rejects the sign: fall back to status.replicas (0) -> 0
    ("+12", 0),
    (" 12", 0),
    ("1_2", 0),
    ("012", -1),  # ParseUint accepts leading zeros: 12
    ("2147483648", 0),  # > MaxInt32
])
def test_fraction_uses_the_strict_max_replicas_parse(annotation, expected):
    deployment = f.deployment("nginx", replicas=10, max_surge=0, max_unavailable=1,
                              status_replicas=0)
    rs = f.replicaset("nginx-rs", replicas=6, owner=deployment,
                      annotations={MAX_REPLICAS_ANNOTATION: annotation})
    assert replicaset_fraction(rs, deployment) == expected


def test_fraction_multiplies_in_int32_like_go():
    # float64(*(rs.Spec.Replicas) * deploymentMaxReplicas): an int32 product that wraps.
    deployment = f.deployment("nginx", replicas=70000, max_surge=0, max_unavailable=1)
    rs = f.replicaset("nginx-rs", replicas=40000, owner=deployment,
                      annotations={MAX_REPLICAS_ANNOTATION: "70000"})
    wrapped = (40000 * 70000 + 2**31) % 2**32 - 2**31
    assert replicaset_fraction(rs, deployment) == round_half_away(wrapped / 70000) - 40000


# --- GetReplicaSetProportion ------------------------------------------------------------


@pytest.mark.parametrize(("rs_replicas", "to_add", "added", "expected"), [
    (0, 5, 0, 0),  # an empty RS never gets a share
    (6, 0, 0, 0),  # nothing to add
    (6, 4, 4, 0),  # everything already added
    (50, 30, 0, 10),  # the fraction (+10) is below what is allowed
    (50, 30, 25, 5),  # capped at what is left to add
    (6, -5, 0, -1),  # scaling down: the fraction (-1)
    (6, -5, -4, -1),  # never below what is left to remove (-1)
])
def test_get_replicaset_proportion(rs_replicas, to_add, added, expected):
    # Deployment 120 from 100 (max-replicas 100) for the up cases; 10 from 12 for down.
    up = to_add >= 0
    deployment = f.deployment("nginx", replicas=120 if up else 10, max_surge=0,
                              max_unavailable=1)
    rs = f.replicaset("nginx-rs", replicas=rs_replicas, owner=deployment,
                      annotations={MAX_REPLICAS_ANNOTATION: "100" if up else "12"})
    assert replicaset_proportion(rs, deployment, to_add, added) == expected


# --- TestResolveFenceposts --------------------------------------------------------------

RESOLVE_FENCEPOSTS_CASES = [
    ("0%", "0%", 0, 0, 1, False),
    ("39%", "39%", 10, 4, 3, False),
    ("oops", "39%", 10, 0, 0, True),
    ("55%", "urg", 10, 0, 0, True),
    (None, "39%", 10, 0, 3, False),
    ("39%", None, 10, 4, 0, False),
    (None, None, 10, 0, 1, False),
]


@pytest.mark.parametrize(("surge", "unavailable", "desired", "expect_surge",
                          "expect_unavailable", "expect_error"),
                         RESOLVE_FENCEPOSTS_CASES,
                         ids=[str(i) for i in range(len(RESOLVE_FENCEPOSTS_CASES))])
def test_resolve_fenceposts(surge, unavailable, desired, expect_surge, expect_unavailable,
                            expect_error):
    if expect_error:
        with pytest.raises(ValueError):
            resolve_fenceposts(surge, unavailable, desired)
    else:
        assert resolve_fenceposts(surge, unavailable, desired) == (expect_surge,
                                                                   expect_unavailable)


@pytest.mark.parametrize(("value", "total", "round_up", "expected"), [
    (5, 10, True, 5),
    ("25%", 10, True, 3),  # 2.5 rounds up for surge
    ("25%", 10, False, 2),  # and down for unavailable
    ("1%", 1, True, 1),
    ("0%", 7, True, 0),
    ("100%", 3, True, 3),
    ("+50%", 10, True, 5),  # strconv.Atoi accepts a sign
    (None, 10, True, 0),
])
def test_scaled_int_or_percent(value, total, round_up, expected):
    assert scaled_int_or_percent(value, total, round_up) == expected


@pytest.mark.parametrize("value", ["5", "5%%", "%", " 5%", "5 %", "1_0%", "x%", "0x10%"])
def test_scaled_int_or_percent_rejects_what_go_rejects(value):
    with pytest.raises(ValueError):
        scaled_int_or_percent(value, 10, True)


# --- TestMaxUnavailable-shaped table for MaxSurge ---------------------------------------

MAX_SURGE_CASES = [
    ("maxSurge less than replicas", 10, 5, 5),
    ("maxSurge equal replicas", 10, 10, 10),
    ("maxSurge greater than replicas (not capped, unlike maxUnavailable)", 5, 10, 10),
    ("maxSurge with replicas is 0", 0, 10, 10),
    ("maxSurge less than replicas with percents", 10, "50%", 5),
    ("maxSurge equal replicas with percents", 10, "100%", 10),
    ("maxSurge greater than replicas with percents", 5, "100%", 5),
    ("maxSurge percent rounds up", 10, "25%", 3),
    ("maxSurge percent rounds up from a fraction", 1, "25%", 1),
    ("maxSurge percent of 0 replicas", 0, "25%", 0),
    ("maxSurge invalid string (ResolveFenceposts error, ignored)", 10, "oops", 0),
    ("maxSurge non-percent string (GetScaledValueFromIntOrPercent error)", 10, "5", 0),
]


@pytest.mark.parametrize(("replicas", "surge", "expected"), [c[1:] for c in MAX_SURGE_CASES],
                         ids=[c[0] for c in MAX_SURGE_CASES])
def test_max_surge(replicas, surge, expected):
    deployment = f.deployment("d", replicas=replicas, max_surge=surge, max_unavailable=1)
    assert max_surge(deployment) == expected


def test_max_surge_with_recreate_strategy_is_0():
    assert max_surge(f.deployment("d", replicas=10, strategy="Recreate")) == 0


def test_max_surge_defaults_to_25_percent_when_unset():
    deployment = f.deployment("d", replicas=10)
    deployment["spec"]["strategy"] = {"type": "RollingUpdate"}
    assert max_surge(deployment) == 3
    del deployment["spec"]["strategy"]
    assert max_surge(deployment) == 3


def test_max_surge_zero_and_zero_resolves_to_zero_surge():
    deployment = f.deployment("d", replicas=10, max_surge="0%", max_unavailable="0%")
    assert max_surge(deployment) == 0


# --- round half away from zero ----------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    (2.5, 3), (-2.5, -3), (0.5, 1), (-0.5, -1), (1.5, 2), (3.5, 4), (-3.5, -4),
    (2.4999999999999996, 2), (0.49999999999999994, 0), (-0.49999999999999994, 0),
    (4503599627370497.0, 4503599627370497),  # 2**52 + 1: floor(x + 0.5) would give + 2
    (0.0, 0), (-0.0, 0), (7.0, 7), (59.09, 59), (42.3, 42),
])
def test_round_half_away_from_zero(value, expected):
    assert round_half_away(value) == expected


def test_python_round_is_not_go_round():
    assert round(2.5) == 2  # banker's rounding: why round() must not be used
    assert round_half_away(2.5) == 3


# --- TestGetNonNegativeInt32FromAnnotation ----------------------------------------------

NON_NEGATIVE_CASES = [
    ("invalid empty", None, None),
    ("invalid", {"test": "invalid", "foo": "2"}, None),
    ("invalid negative ", {"test": "-1", "foo": "2"}, None),
    ("valid zero", {"test": "0", "foo": "2"}, 0),
    ("valid", {"test": "13", "foo": "2"}, 13),
    ("valid max", {"test": str(2**31 - 1), "foo": "2"}, 2**31 - 1),
    ("invalid max out of range", {"test": str(2**31), "foo": "2"}, None),
    ("invalid max out of range 2", {"test": str(2**32), "foo": "2"}, None),
]


@pytest.mark.parametrize(("annotations", "expected"), [c[1:] for c in NON_NEGATIVE_CASES],
                         ids=[c[0] for c in NON_NEGATIVE_CASES])
def test_get_non_negative_int32_from_annotation(annotations, expected):
    rs = f.replicaset("nginx", annotations=annotations)
    assert non_negative_int32_annotation(rs, "test") == expected


# --- TestFindNewReplicaSet --------------------------------------------------------------


def test_find_new_replicaset():
    deployment = f.deployment("nginx", image="nginx")
    new_rs = f.replicaset("nginx-new", owner=deployment, image="nginx", pod_hash="hash",
                          created="2026-03-15T12:01:00Z")
    new_rs_dup = f.replicaset("nginx-dup", owner=deployment, image="nginx",
                              pod_hash="different-hash", created="2026-03-15T12:00:00Z")
    old_rs = f.replicaset("nginx-old", owner=deployment, image="nginx-old-1",
                          pod_hash="old", created="2026-03-15T11:59:00Z")
    # Get new ReplicaSet with the same template as Deployment spec but different
    # pod-template-hash value
    assert find_new_replicaset(deployment, [new_rs, old_rs]) is new_rs
    # Get the oldest new ReplicaSet when there are more than one ReplicaSet with the
    # same template
    assert find_new_replicaset(deployment, [new_rs, old_rs, new_rs_dup]) is new_rs_dup
    # Get nil new ReplicaSet
    assert find_new_replicaset(deployment, [old_rs]) is None


# --- predict_scale: Deployments ---------------------------------------------------------


def _rollout_cluster() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Deployment mid-rollout: old RS on node-a/node-b, new RS on node-b/node-c."""
    deployment = f.deployment("web", replicas=4, max_surge=0, max_unavailable=1)
    old = f.replicaset("web-old", replicas=2, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created="2026-01-01T00:00:00Z")
    new = f.replicaset("web-new", replicas=2, owner=deployment, pod_hash="new",
                       created="2026-02-01T00:00:00Z")
    for rs in (old, new):
        _annotate(rs, 4, 4)
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
    assert prediction.replica_set_targets == {"web-old": (2, 1), "web-new": (2, 1)}
    # node-b holds one pod of each RS: rank 2 across the Deployment, 1 elsewhere. Ranked
    # per RS alone every pod would have rank 1 and the choice would be a coin toss.
    assert sorted(p.name for p in prediction.victims) == ["new-b", "old-b"]
    assert {p.replica_set for p in prediction.victims} == {"web-old", "web-new"}
    # But that is the order where neither ReplicaSet has deleted yet. If one syncs first,
    # node-b loses its pod and the other ReplicaSet's two pods tie at rank 1: either may
    # go (tests/test_rollout.py covers the model).
    assert sorted(p.name for p in prediction.possible_victims) == ["new-c", "old-a"]


def test_scale_down_that_completes_the_new_replicaset_removes_the_old_ones():
    """Found by the e2e differential run (seed 4) against the real controllers: 3 -> 2
    mid-rollout splits to new 3 -> 2, old 2 -> 2; the new ReplicaSet then keeps 2
    available pods, is saturated, and the Deployment controller's next sync scales the
    old ReplicaSet to 0. Its pods are victims of this scale-down too."""
    deployment = f.deployment("web", replicas=3, max_surge=2, max_unavailable=0)
    old = f.replicaset("web-old", replicas=2, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created="2026-01-01T00:00:00Z")
    new = f.replicaset("web-new", replicas=3, owner=deployment, pod_hash="new",
                       created="2026-02-01T00:00:00Z", available=2)
    for rs in (old, new):
        _annotate(rs, 3, 5)
    pods = [
        f.pod("old-a", owner=old, node_name="node-a"),
        f.pod("old-b", owner=old, node_name="node-b"),
        f.pod("new-a", owner=new, node_name="node-a"),
        f.pod("new-b", owner=new, node_name="node-b"),
        f.pod("new-c", owner=new, node_name="node-c", phase="Unknown", ready=False),
    ]
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 2, NOW)
    assert prediction.replica_set_targets == {"web-old": (2, 0), "web-new": (3, 2)}
    assert sorted(p.name for p in prediction.victims) == ["new-c", "old-a", "old-b"]
    assert prediction.possible_victims == []
    assert any("scales the old ReplicaSets to 0" in note for note in prediction.notes)
    # A kept pod that is not available: no saturation, the proportional split stands.
    pods[3] = f.pod("new-b", owner=new, node_name="node-b", ready=False)
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 2, NOW)
    assert prediction.replica_set_targets == {"web-old": (2, 2), "web-new": (3, 2)}
    # minReadySeconds not yet elapsed since the pods became ready: not available either.
    pods[3] = f.pod("new-b", owner=new, node_name="node-b")
    deployment["spec"]["minReadySeconds"] = 10**9
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 2, NOW)
    assert prediction.replica_set_targets == {"web-old": (2, 2), "web-new": (3, 2)}


def test_split_that_leaves_one_replicaset_with_pods_gives_it_the_new_count():
    """Found by the e2e differential run (seed 63): 6 -> 2 with maxSurge 50% splits to
    old 1 -> 0, new 8 -> 3 (2 + surge 1); on the next sync the new ReplicaSet is the only
    one with pods, and scale() sets it to exactly 2."""
    deployment = f.deployment("web", replicas=6, max_surge="50%", max_unavailable="25%")
    old = f.replicaset("web-old", replicas=1, owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created="2026-01-01T00:00:00Z")
    new = f.replicaset("web-new", replicas=8, owner=deployment, pod_hash="new",
                       created="2026-02-01T00:00:00Z", available=3)
    for rs in (old, new):
        _annotate(rs, 6, 9)
    pods = [f.pod("old-a", owner=old, node_name="node-a")]
    pods += [f.pod(f"new-{i}", owner=new, node_name=f"node-{i}", cost=str(i),
                   ready=i >= 5) for i in range(8)]
    prediction = predict_scale(Snapshot([deployment, old, new, *pods]), deployment, 2, NOW)
    assert prediction.replica_set_targets == {"web-old": (1, 0), "web-new": (8, 2)}
    assert sorted(p.name for p in prediction.victims) == [
        "new-0", "new-1", "new-2", "new-3", "new-4", "new-5", "old-a"]
    assert any("the only one with pods" in note for note in prediction.notes)


def test_two_syncs_of_one_replicaset_make_the_recounted_ranks_uncertain():
    """Found by the e2e differential run (seed 63 again): the new ReplicaSet goes 8 -> 3
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
        _annotate(rs, 6, 9)
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
    assert prediction.replica_set_targets == {"web-old": (1, 0), "web-new": (8, 2)}
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
    assert prediction.replica_set_targets == {"api-1": (5, 3)}
    assert [p.name for p in prediction.victims] == ["api-0", "api-1"]  # lowest costs
    assert [p.name for p in prediction.survivors] == ["api-2", "api-3", "api-4"]
    # An old RS scaled to 0 does not count as active.
    old = f.replicaset("api-0", replicas=0, owner=deployment, image=OLD_IMAGE,
                       pod_hash="h0", created="2025-01-01T00:00:00Z")
    prediction = predict_scale(Snapshot([deployment, rs, old, *pods]), deployment, 3, NOW)
    assert prediction.replica_set_targets["api-1"] == (5, 3)
    assert prediction.replica_set_targets["api-0"] == (0, 0)
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
    assert prediction.replica_set_targets["api-1"] == (3, 2)
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
    assert [p.name for p in prediction.victims] == ["db-3"]
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
