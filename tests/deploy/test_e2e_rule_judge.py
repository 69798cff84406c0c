"""The e2e differentials' rule judge (tests/e2e/rule_judge.py) and what the e2e summary
reports of it (tests/e2e/summary.py): a rule the real deletions broke that plan allowed
is a missed denial, and fails the run; denials where no deletion broke a rule are counted
per kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e import summary
from tests.e2e.rule_judge import (
    MIN_PROTECTED,
    MISSED_DENIAL,
    OVER_DENIAL,
    PROTECTED_LAST,
    ScaleDownRules,
    broken_rules,
    judge_rules,
    per_kind,
)
from tests.e2e.workloads import compare

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ScaleDownRules()


def document(pods: dict[str, bool], to: int, *violations: str) -> dict[str, Any]:
    """A plan document: pod name -> protected, the target, the rules plan named."""
    return {"pods": [{"name": n, "protected": p} for n, p in pods.items()],
            "replicas": {"from": len(pods), "to": to},
            "violations": [{"rule": r, "message": "", "fixes": []} for r in violations]}


# inference pods a, b; hybrid pod h; pod u never scheduled (no pool: not protected)
PODS = {"a": True, "b": True, "h": False, "u": False}


def test_the_rules_of_the_policy_e2e_installs() -> None:
    shipped = yaml.safe_load((ROOT / "manifests/base/policy.yaml").read_text())
    assert ScaleDownRules.from_policy(shipped) == ScaleDownRules(True, 0)
    assert ScaleDownRules.from_policy(
        {"scaleDown": {"protectedLast": False, "minProtectedReplicas": "50%"}}
    ) == ScaleDownRules(False, "50%")


def test_protected_last_broken_while_any_pod_outside_protected_pools_survives() -> None:
    doc = document(PODS, 2)
    assert broken_rules(doc, {"a", "h"}, DEFAULT) == [PROTECTED_LAST]  # u survives
    assert broken_rules(doc, {"a", "h", "u"}, DEFAULT) == []
    assert broken_rules(doc, {"h", "u"}, DEFAULT) == []  # no protected pod went
    assert broken_rules(doc, {"a"}, ScaleDownRules(protected_last=False)) == []


def test_min_protected_replicas_counts_what_is_left_at_the_target() -> None:
    doc = document(PODS, 2)
    assert broken_rules(doc, {"a", "h", "u"}, ScaleDownRules(True, 1)) == []
    assert broken_rules(doc, {"a", "h", "u"}, ScaleDownRules(True, 2)) == [MIN_PROTECTED]
    assert broken_rules(doc, {"a", "h", "u"}, ScaleDownRules(True, "50%")) == []
    assert broken_rules(doc, {"a", "h", "u"}, ScaleDownRules(True, "51%")) == [MIN_PROTECTED]
    # A LeaderWorkerSet's replica is a group: 2 groups of 2 pods ask 51% of 4 pods, 3.
    assert broken_rules(doc, {"a"}, ScaleDownRules(False, "51%"), pods_per_replica=2) == [
        MIN_PROTECTED]
    assert broken_rules(doc, {"h"}, ScaleDownRules(False, 5)) == []  # no protected pod went


def test_a_rule_broken_only_after_recovery_that_plan_allowed_is_a_missed_denial() -> None:
    judged = judge_rules(document(PODS, 2), {"stalled": {"h"}, "recovered": {"h", "a"}},
                         DEFAULT)
    assert judged.missed == [PROTECTED_LAST]
    assert judged.classes == [MISSED_DENIAL]
    assert judged.problems == ["missed denial: plan allowed protectedLast, the real deletions "
                               "broke it (recovered: a deleted)"]


def test_a_rule_plan_named_is_no_missed_denial_and_no_over_denial() -> None:
    judged = judge_rules(document(PODS, 2, PROTECTED_LAST), {"stalled": {"a"}}, DEFAULT)
    assert (judged.missed, judged.over_denied, judged.problems) == ([], False, [])


def test_a_denial_no_observation_bears_out_is_an_over_denial() -> None:
    judged = judge_rules(document(PODS, 2, PROTECTED_LAST),
                         {"stalled": {"h"}, "recovered": {"h", "u"}}, DEFAULT)
    assert judged.over_denied and judged.classes == [OVER_DENIAL]
    assert judged.problems == []


def test_counts_per_kind() -> None:
    counted = per_kind([("CloneSet", [OVER_DENIAL]), ("CloneSet", []),
                        ("Rollout", [MISSED_DENIAL, "other"])])
    assert counted == {
        "CloneSet": {"states": 2, "overDenials": 1, "missedDenials": 0},
        "Rollout": {"states": 1, "overDenials": 0, "missedDenials": 1}}


@pytest.mark.parametrize("missed", [0, 1])
def test_the_summary_reports_both_per_kind_and_fails_on_a_missed_denial(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], missed: int) -> None:
    (tmp_path / "results.json").write_text(json.dumps({"scenarios": 3, "passed": 3}))
    for label, name in summary.DIFFERENTIALS.items():
        kind = "LeaderWorkerSet" if "LWS" in label else "Deployment"
        (tmp_path / name).write_text(json.dumps({
            "states": 5, "mismatches": missed if kind == "LeaderWorkerSet" else 0,
            "byKind": {kind: {"states": 5, "overDenials": 2,
                              "missedDenials": missed if kind == "LeaderWorkerSet" else 0}}}))
    assert summary.main(tmp_path) == missed
    out = capsys.readouterr().out
    assert ("over-denials (plan denied, the real deletions broke no rule) per kind: "
            "Deployment 6 of 15, LeaderWorkerSet 2 of 5") in out
    assert ("missed denials (plan allowed, the real deletions broke a rule) per kind: "
            f"Deployment 0 of 15, LeaderWorkerSet {missed} of 5") in out


def _tied_specified_pods_document() -> dict[str, Any]:
    """plan's document for two ready specified CloneSet pods tied for one ready slot."""
    victim = {"name": "c-a", "certain": False}
    return {"victims": [victim], "possibleVictims": ["c-b"], "pods": [],
            "blocked": [{"name": "c-b", "waitingOn": "c-x"},
                        {"name": "c-c", "waitingOn": "c-x"}]}


def test_a_blocked_pod_plan_also_names_a_possible_victim_may_go_first() -> None:
    # The controller's list order decides which tied pod takes the slot: either may go now.
    assert compare(_tied_specified_pods_document(), {"c-b"}).problems == []
    # A blocked pod that is no possible victim must still wait.
    assert compare(_tied_specified_pods_document(), {"c-c"}).problems == [
        "predicted blocked but deleted: ['c-c']"]
