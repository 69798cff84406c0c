"""The port of deployment_util.go, ported from Kubernetes' own tests.

Upstream sources (kubernetes/kubernetes):
- pkg/controller/deployment/util/deployment_util_test.go (recent version with
  DeploymentPodReplacementPolicy): TestGetReplicaSetFraction, TestResolveFenceposts,
  TestGetNonNegativeInt32FromAnnotation, TestFindNewReplicaSet, and TestMaxUnavailable,
  whose shape the max-surge table copies.
- pkg/controller/deployment/util/deployment_util.go (GetReplicaSetProportion,
  getReplicaSetFraction, MaxSurge, ResolveFenceposts); k8s.io/utils/integer
  RoundToInt32 = math.Round.
"""

from __future__ import annotations

import pytest

from tests.support import factories as f
from webhook.core.deployment.deployment_util import (
    MAX_REPLICAS_ANNOTATION,
    find_new_replicaset,
    max_surge,
    non_negative_int32_annotation,
    replicaset_fraction,
    replicaset_proportion,
    resolve_fenceposts,
    round_half_away,
)
from webhook.core.objects.intstr import scaled_int_or_percent

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
