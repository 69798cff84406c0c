"""StatefulSet scale-downs that wait: the condemned-pod rule of the StatefulSet controller.

Upstream source (kubernetes/kubernetes v1.37): pkg/controller/statefulset/
stateful_set_control.go (`updateStatefulSet`: the first unavailable pod;
`processCondemned`: a condemned pod that is not Running and Ready blocks unless it is
that pod) and stateful_set_utils.go (`isRunningAndReady`, `isUnavailable`).
"""

from __future__ import annotations

from typing import Any

from tests.support import factories as f
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.predict import predict_scale
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-03-15T12:00:00Z")
POLICY = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                                 {"name": "hybrid", "deletionCost": -100}]})
NODES = [f.node("inf-1", "inference"), f.node("hyb-1", "hybrid")]


def stateful(health: dict[int, str], replicas: int | None = None,
             policy: str = "OrderedReady") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A StatefulSet `db` with a pod per ordinal on the hybrid pool: "ok" (Running,
    Ready), "not-ready" (Running, not Ready), "unknown-ready" (phase Unknown, Ready) or
    "failed"."""
    sts = f.statefulset("db", replicas=replicas or len(health))
    sts["spec"]["podManagementPolicy"] = policy
    pods = []
    for ordinal, state in health.items():
        phase = {"unknown-ready": "Unknown", "failed": "Failed"}.get(state, "Running")
        pods.append(f.pod(f"db-{ordinal}", owner=sts, node_name="hyb-1", phase=phase,
                          ready=state in ("ok", "unknown-ready")))
    return sts, pods


def on_inference(pods: list[dict[str, Any]], *names: str) -> None:
    for pod in pods:
        if pod["metadata"]["name"] in names:
            pod["spec"]["nodeName"] = "inf-1"


def fates(health: dict[int, str], to: int, policy: str = "OrderedReady") -> tuple[
        list[str], list[tuple[str, str]]]:
    sts, pods = stateful(health, policy=policy)
    prediction = predict_scale(Snapshot([sts, *NODES, *pods]), sts, to, NOW)
    return ([p.name for p in prediction.victims],
            [(b.pod.name, b.waiting_on) for b in prediction.blocked])


def test_a_condemned_pod_that_is_not_ready_stops_the_scale_down_below_the_first_unavailable():
    # db-3 goes; db-2 is not Running and Ready and db-1 (lower) is the first unavailable
    # pod, so the controller waits at db-2 and db-1, db-0 wait behind it.
    victims, blocked = fates({0: "ok", 1: "not-ready", 2: "not-ready", 3: "ok"}, 0)
    assert victims == ["db-3"]
    assert blocked == [("db-2", "db-2"), ("db-1", "db-2"), ("db-0", "db-2")]


def test_the_first_unavailable_pod_itself_is_deleted():
    victims, blocked = fates({0: "ok", 1: "ok", 2: "not-ready", 3: "ok"}, 0)
    assert victims == ["db-3", "db-2", "db-1", "db-0"]
    assert blocked == []


def test_ready_in_phase_unknown_blocks_on_its_own():
    # Not Running and Ready, yet not unavailable (Ready=True): it is never the first
    # unavailable pod, so it waits even with every other pod healthy.
    victims, blocked = fates({0: "ok", 1: "ok", 2: "unknown-ready", 3: "ok"}, 1)
    assert victims == ["db-3"]
    assert blocked == [("db-2", "db-2"), ("db-1", "db-2")]


def test_a_failed_condemned_pod_blocks_when_a_lower_pod_is_not_ready():
    # The controller sees Failed pods too; db-3 is never a victim (not active) but the
    # controller stops at it, as db-1 is the first unavailable pod.
    victims, blocked = fates({0: "ok", 1: "not-ready", 2: "ok", 3: "failed"}, 0)
    assert victims == []
    assert blocked == [("db-2", "db-3"), ("db-1", "db-3"), ("db-0", "db-3")]


def test_a_pod_in_the_new_range_that_is_not_ready_holds_every_condemned_pod():
    victims, blocked = fates({0: "not-ready", 1: "ok", 2: "ok"}, 1)
    assert victims == []
    assert blocked == [("db-2", "db-0"), ("db-1", "db-0")]


def test_parallel_deletes_every_condemned_pod_at_once():
    victims, blocked = fates({0: "ok", 1: "not-ready", 2: "not-ready", 3: "ok"}, 0,
                             policy="Parallel")
    assert victims == ["db-3", "db-2", "db-1", "db-0"]
    assert blocked == []


def test_the_stalled_state_is_judged_too():
    # Scaling to 0 ends with nothing left, which no rule objects to; but the controller
    # deletes the protected db-3 and then waits at db-2 while the hybrid pods stay.
    sts, pods = stateful({0: "ok", 1: "not-ready", 2: "not-ready", 3: "ok"})
    on_inference(pods, "db-3")
    assessment = assess_scale(Snapshot([sts, *NODES, *pods]), POLICY, sts, 0, NOW)
    verdict = assessment.verdict
    assert not verdict.allowed
    [violation] = verdict.violations
    assert violation.rule == "protectedLast"
    assert violation.message.startswith(
        "while the scale-down waits on db-2, it would delete protected-pool pod db-3")
    assert any("the scale-down stops at db-2" in w for w in verdict.warnings)


def test_a_stall_before_any_protected_pod_is_allowed():
    sts, pods = stateful({0: "ok", 1: "not-ready", 2: "not-ready", 3: "ok"})
    on_inference(pods, "db-0")
    assessment = assess_scale(Snapshot([sts, *NODES, *pods]), POLICY, sts, 1, NOW)
    assert assessment.verdict.allowed and not assessment.verdict.violations
    assert [b.pod.name for b in assessment.prediction.blocked] == ["db-2", "db-1"]


def test_the_end_state_is_judged_first_and_once():
    # Both states break protectedLast: the stall loses db-3, the end state db-3 and db-1
    # while db-0 stays; the violation names the end state, once.
    sts, pods = stateful({0: "ok", 1: "not-ready", 2: "not-ready", 3: "ok"})
    on_inference(pods, "db-3", "db-1")
    verdict = assess_scale(Snapshot([sts, *NODES, *pods]), POLICY, sts, 1, NOW).verdict
    [violation] = verdict.violations
    assert violation.message.startswith("would delete protected-pool pods db-3 (node inf-1, "
                                        "pool inference), db-1 (node inf-1, pool inference)")
