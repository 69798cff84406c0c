"""Policy verdicts on predicted scale-downs: rules, worst case, enforcement, fixes."""

from __future__ import annotations

from tests.support import factories as f
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-02-01T00:00:00Z")
NODES = [f.node("inf-1", "inference"), f.node("inf-2", "inference"),
         f.node("hyb-1", "hybrid"), f.node("hyb-2", "hybrid")]


def policy(**scale_down):
    return parse_policy({"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                                   {"name": "hybrid", "deletionCost": -100}],
                         "scaleDown": scale_down})


def replicaset_on(placements: list[tuple[str, str | None]]) -> tuple[Snapshot, dict]:
    rs = f.replicaset("web", replicas=len(placements))
    pods = [f.pod(f"web-{i}", node_name=node, owner=rs, cost=cost,
                  ready_time=f"2026-01-01T00:00:{i:02d}Z")
            for i, (node, cost) in enumerate(placements)]
    return Snapshot([rs, *NODES, *pods]), rs


def test_costs_in_place_remove_hybrid_first_and_allow():
    view, rs = replicaset_on([("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "-100"),
                              ("hyb-2", "-100")])
    result = assess_scale(view, policy(), rs, 2, NOW)
    assert sorted(p.name for p in result.prediction.victims) == ["web-2", "web-3"]
    assert result.verdict.allowed and not result.verdict.violations


def test_missing_costs_break_protected_last_and_name_everything():
    # no costs at all: rank decides (two pods share inf-1), so an inference pod goes first
    view, rs = replicaset_on([("inf-1", None), ("inf-1", None), ("hyb-1", None)])
    result = assess_scale(view, policy(), rs, 2, NOW)
    verdict = result.verdict
    assert not verdict.allowed
    (violation,) = verdict.violations
    assert violation.rule == "protectedLast"
    assert "inf-1" in violation.message and "pool inference" in violation.message
    assert "web-2 (node hyb-1, pool hybrid)" in violation.message
    assert "fix:" in violation.message
    assert verdict.safe_replicas == 3  # any single deletion may hit inference now
    assert any("reconcile" in w for w in verdict.warnings)


def test_worst_case_counts_a_tied_protected_pod():
    # hyb-1 and inf-1 pods tie on rules 1-5 (same cost 0, rank 1): either may go
    view, rs = replicaset_on([("inf-1", None), ("hyb-1", None)])
    result = assess_scale(view, policy(), rs, 1, NOW)
    assert len(result.prediction.possible_victims) == 1
    (violation,) = result.verdict.violations
    (predicted,) = result.prediction.victims
    expected = "would delete" if predicted.node_name == "inf-1" else "may delete"
    assert violation.message.startswith(expected)


def test_scaling_to_zero_never_breaks_protected_last():
    view, rs = replicaset_on([("inf-1", "1000"), ("hyb-1", "-100")])
    assert assess_scale(view, policy(), rs, 0, NOW).verdict.allowed


def test_min_protected_replicas_counts_and_percentages():
    view, rs = replicaset_on([("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "-100")])
    # 3 -> 1: hybrid then one inference pod go; 1 inference pod is left, 2 required
    result = assess_scale(view, policy(minProtectedReplicas=2, protectedLast=False), rs, 1, NOW)
    assert [v.rule for v in result.verdict.violations] == ["minProtectedReplicas"]
    assert "leaves 1 pod on protected pools" in result.verdict.violations[0].message
    assert result.verdict.safe_replicas == 2
    allowed = assess_scale(view, policy(minProtectedReplicas="100%"), rs, 2, NOW)
    assert allowed.verdict.allowed  # only the hybrid pod goes


def test_enforcement_modes():
    view, rs = replicaset_on([("inf-1", None), ("inf-1", None), ("hyb-1", None)])
    for mode, allowed in (("enforce", False), ("warn", True), ("dryrun", True)):
        verdict = assess_scale(view, policy(enforcement=mode), rs, 2, NOW).verdict
        assert verdict.allowed is allowed and verdict.violations and verdict.enforcement == mode


def test_hand_set_cost_is_named_as_such():
    view, rs = replicaset_on([("inf-1", "1000"), ("inf-1", "1000"), ("hyb-1", "5000")])
    verdict = assess_scale(view, policy(), rs, 2, NOW).verdict
    assert any("set by hand" in w and "web-2" in w for w in verdict.warnings)


def test_a_cost_another_controller_owns_is_named_with_its_writer():
    """A hybrid pod whose cost Karpenter overwrote (its managedFields say so): the warning
    names Karpenter, not a person; a hand-set cost beside it keeps its own warning."""
    view, rs = replicaset_on([("inf-1", "1000"), ("inf-1", "1000"), ("hyb-1", "5000"),
                              ("hyb-2", "3000")])
    pod = next(p for p in view.pods("ml") if p["metadata"]["name"] == "web-2")
    pod["metadata"]["managedFields"] = [{
        "manager": "karpenter", "operation": "Update", "time": "2026-01-02T00:00:00Z",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {
            "f:controller.kubernetes.io/pod-deletion-cost": {}}}}}]
    verdict = assess_scale(Snapshot([rs, *NODES, *view.pods("ml")]), policy(), rs, 2,
                           NOW).verdict
    (foreign,) = [w for w in verdict.warnings if "karpenter" in w]
    assert foreign.startswith("web-2 (node hyb-1, pool hybrid): deletion cost written by "
                              "karpenter (another controller owns the annotation)")
    assert "poolguard does not overwrite it" in foreign
    assert "Other writers of the deletion cost" in foreign
    (by_hand,) = [w for w in verdict.warnings if "set by hand" in w]
    assert "web-3" in by_hand and "web-2" not in by_hand


def test_safe_replicas_is_the_smallest_count_at_or_above_the_target_breaking_no_rule():
    # The safe count once meant "removes no protected pod", whatever the target: 2 here at
    # every target. It is now the count the clamp writes and the fix names.
    view, rs = replicaset_on([("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "-100"),
                              ("hyb-2", "-100")])
    allowed = assess_scale(view, policy(), rs, 3, NOW)
    assert allowed.verdict.allowed and allowed.verdict.safe_replicas == 3
    # allowed (no hybrid pod survives to break protectedLast), though it removes a
    # protected pod: the target itself breaks no rule
    lower = assess_scale(view, policy(), rs, 1, NOW)
    assert lower.verdict.allowed and not lower.verdict.violations
    assert lower.verdict.safe_replicas == 1
    hybrid_view, hybrid_rs = replicaset_on([("hyb-1", "-100"), ("hyb-2", "-100")])
    assert assess_scale(hybrid_view, policy(), hybrid_rs, 1, NOW).verdict.safe_replicas == 1


def test_min_protected_above_the_new_count_is_explained():
    view, rs = replicaset_on([("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "-100")])
    result = assess_scale(view, policy(minProtectedReplicas=3, protectedLast=False), rs, 0, NOW)
    (violation,) = result.verdict.violations
    assert ("minProtectedReplicas requires 3, more than the 0 replicas asked for, so a scale "
            "below 3 that removes a protected pod always breaks it") in violation.message
    # a hybrid pod with a hand-set high cost survives, so an inference pod goes
    view, rs = replicaset_on([("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "5000")])
    percent = assess_scale(view, policy(minProtectedReplicas="60%", protectedLast=False), rs, 2,
                           NOW)
    (violation,) = percent.verdict.violations
    assert "requires 2 (60% of 2 replicas, rounded up)" in violation.message
