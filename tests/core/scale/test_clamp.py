"""The clamp of an autoscaler's scale-down: the smallest safe count within [asked, current]."""

from __future__ import annotations

import pytest

from tests.support import factories as f
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.clamp import bounded, clamp_scale_down
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-02-01T00:00:00Z")
NODES = [f.node("inf-1", "inference"), f.node("inf-2", "inference"), f.node("hyb-1", "hybrid"),
         f.node("hyb-2", "hybrid")]
POOLS = [{"name": "inference", "deletionCost": 1000, "protected": True},
         {"name": "hybrid", "deletionCost": -100}]


def policy(**scale_down):
    return parse_policy({"pools": POOLS, "scaleDown": scale_down})


def serving(replicas: int = 5) -> tuple[Snapshot, dict]:
    """Two cheap hybrid pods, two inference pods, and a hybrid pod whose cost was set by hand.

    The hand-set pod goes last, so a scale below 3 removes an inference pod while it survives.
    """
    deploy = f.deployment("svc", replicas=replicas)
    rs = f.replicaset("svc-1", owner=deploy, replicas=replicas, pod_hash="1")
    pods = [f.pod("svc-1-h1", node_name="hyb-1", owner=rs, cost="-100"),
            f.pod("svc-1-h2", node_name="hyb-2", owner=rs, cost="-100"),
            f.pod("svc-1-i1", node_name="inf-1", owner=rs, cost="1000"),
            f.pod("svc-1-i2", node_name="inf-2", owner=rs, cost="1000"),
            f.pod("svc-1-pinned", node_name="hyb-1", owner=rs, cost="5000")]
    return Snapshot([deploy, rs, *NODES, *pods]), deploy


@pytest.mark.parametrize(("requested", "current", "safe", "expected"), [
    (2, 5, 3, 3),  # the safe count
    (2, 5, 1, 2),  # never below the request
    (2, 5, 7, 5),  # never above the current count
    (2, 5, None, 5),  # no safe count known: keep the current one
    (6, 5, 3, 6),  # not a scale-down: untouched
])
def test_bounded_keeps_the_safe_count_between_request_and_current(requested, current, safe,
                                                                  expected):
    assert bounded(requested, current, safe) == expected


def test_unsafe_request_is_lowered_to_the_smallest_safe_count():
    view, deploy = serving()
    clamp = clamp_scale_down(view, policy(), deploy, 2, 5, NOW)
    assert (clamp.replicas, clamp.clamped, clamp.holds) == (3, True, False)
    assert clamp.assessment.verdict.safe_replicas == 3
    assert clamp.reason() == (
        "scaled Deployment ml/svc from 5 to 3 replicas, not the 2 asked: 2 would "
        "break [protectedLast] now; 3 is the smallest count that breaks no rule")
    # the clamped count is what /validate-scale then allows
    assert not assess_scale(view, policy(), deploy, 3, NOW, quick=True).verdict.violations


@pytest.mark.parametrize("requested", [3, 4])
def test_safe_request_is_left_alone(requested):
    view, deploy = serving()
    clamp = clamp_scale_down(view, policy(), deploy, requested, 5, NOW)
    assert (clamp.replicas, clamp.clamped) == (requested, False)
    assert clamp.reason() == ""


def test_no_safe_scale_down_keeps_the_current_count():
    deploy = f.deployment("svc", replicas=3)
    rs = f.replicaset("svc-1", owner=deploy, replicas=3, pod_hash="1")
    # no costs: two pods share inf-1, so the ranking removes an inference pod first
    pods = [f.pod("svc-1-a", node_name="inf-1", owner=rs),
            f.pod("svc-1-b", node_name="inf-1", owner=rs),
            f.pod("svc-1-c", node_name="hyb-1", owner=rs)]
    view = Snapshot([deploy, rs, *NODES, *pods])
    clamp = clamp_scale_down(view, policy(), deploy, 1, 3, NOW)
    assert (clamp.replicas, clamp.holds) == (3, True)
    assert clamp.reason() == ("kept Deployment ml/svc at 3 replicas (asked: 1): every lower "
                              "count would break [protectedLast] now")


def test_min_protected_replicas_at_the_safe_count_keeps_the_current_count():
    view, deploy = serving()
    # at 3 no protected pod goes, so minProtectedReplicas cannot be broken there either
    assert clamp_scale_down(view, policy(minProtectedReplicas=2), deploy, 2, 5,
                            NOW).replicas == 3


def test_out_of_scope_workload_is_not_clamped():
    view, deploy = serving()
    deploy["metadata"]["labels"] = {"poolguard.dev/skip": "true"}
    clamp = clamp_scale_down(view, policy(), deploy, 1, 5, NOW)
    assert (clamp.replicas, clamp.clamped) == (1, False)
    assert "poolguard.dev/skip=true" in clamp.out_of_scope


def percent_serving() -> tuple[Snapshot, dict]:
    """Two cheap hybrid pods, three inference pods, a hand-pinned hybrid pod going last."""
    deploy = f.deployment("svc", replicas=6)
    rs = f.replicaset("svc-1", owner=deploy, replicas=6, pod_hash="1")
    pods = [f.pod("svc-1-h1", node_name="hyb-1", owner=rs, cost="-100"),
            f.pod("svc-1-h2", node_name="hyb-2", owner=rs, cost="-100"),
            f.pod("svc-1-i1", node_name="inf-1", owner=rs, cost="1000"),
            f.pod("svc-1-i2", node_name="inf-2", owner=rs, cost="1000"),
            f.pod("svc-1-i3", node_name="inf-1", owner=rs, cost="1001"),
            f.pod("svc-1-pinned", node_name="hyb-1", owner=rs, cost="5000")]
    return Snapshot([deploy, rs, *NODES, *pods]), deploy


def test_a_percentage_clamps_to_the_smallest_allowed_count_not_the_lossless_one():
    # minProtectedReplicas 50%, protectedLast off: 1 keeps no inference pod (1 required),
    # 2 keeps one (1 required), 3 keeps two (2 required): 2 and 3 are allowed, though
    # they remove inference pods; only 4 and up remove none. The clamp writes 2.
    view, deploy = percent_serving()
    rules = policy(protectedLast=False, minProtectedReplicas="50%")
    allowed = {to: not assess_scale(view, rules, deploy, to, NOW).verdict.violations
               for to in range(6)}
    assert allowed == {0: True, 1: False, 2: True, 3: True, 4: True, 5: True}
    clamp = clamp_scale_down(view, rules, deploy, 1, 6, NOW)
    assert (clamp.replicas, clamp.holds) == (2, False)
    assert clamp.reason().endswith("2 is the smallest count that breaks no rule")
    verdict = clamp.assessment.verdict
    assert verdict.safe_replicas == 2
    assert verdict.violations[0].fixes[0] == (
        "scale to 2 replicas for now (the smallest count above 1 that breaks no rule)")
