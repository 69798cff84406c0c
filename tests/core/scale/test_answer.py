"""`answer_scale`: one answer to a scale request, in the order the webhooks decide.

Both scale webhooks and `plan` reach the decision through it, so the twins are kept equal
here, in one process: over the scale matrix (tests/support/scale_matrix.py) the answer
`/validate-scale` gets agrees with `plan`'s document, and the chain `/mutate-scale` then
`/validate-scale` agrees with `plan --as` the requester. tests/cli/test_twin.py keeps one
end-to-end twin for the wiring (HTTP, the server's state, the command line).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import factories as f
from tests.support import reviews
from tests.support.scale_matrix import CASES, POLICIES, POOLS, STATE
from webhook.cli.plan_document import plan_workload
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import Policy, parse_policy
from webhook.core.scale.answer import ScaleAnswer, ScaleOutcome, ScaleRequest, answer_scale
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-02-01T00:00:00Z")
KIND = {"deployments": "Deployment", "replicasets": "ReplicaSet", "statefulsets": "StatefulSet"}
HPA, ADMIN = reviews.HPA["username"], reviews.ADMIN["username"]
ARGOCD = "system:serviceaccount:argocd:argocd-application-controller"
VIEW = Snapshot(STATE)
STALE = lambda: "the cluster cache is 90s old"  # noqa: E731


def policy(extra: dict[str, Any] | None = None) -> Policy:
    return parse_policy({"pools": POOLS, **(extra or {})})


def workload(resource: str, ns: str, name: str) -> dict[str, Any]:
    found = VIEW.workload(KIND[resource], ns, name)
    assert found is not None
    return dict(found)


def request(kind: str, ns: str, name: str, current: int | None, target: int,
            user: str | None = ADMIN, obj: dict[str, Any] | None = None) -> ScaleRequest:
    return ScaleRequest(kind, ns, name, target, current, user, obj)


def verdict(answer: ScaleAnswer) -> tuple[bool, set[str], str]:
    """What the webhook answers, as the twins compare it: allowed, rules, the verdict."""
    if answer.outcome is not ScaleOutcome.JUDGED:
        return True, set(), "allowed"
    assert answer.assessment is not None
    judged = answer.assessment.verdict
    rules = {v.rule for v in judged.violations}
    return judged.allowed, rules, ("allowed" if not rules else "denied" if not judged.allowed
                                   else f"violation-{judged.enforcement}")


def plan_verdict(doc: dict[str, Any]) -> tuple[bool, set[str], str]:
    rules = {v["rule"] for v in doc["violations"]}
    return doc["allowed"], rules, ("allowed" if not rules else "denied" if not doc["allowed"]
                                   else f"violation-{doc['enforcement']}")


def chained(pol: Policy, resource: str, ns: str, name: str, current: int, target: int,
            user: str) -> tuple[int, ScaleAnswer]:
    """As the API server chains the webhooks: the count `/mutate-scale` lets through (a
    requester under clamp only), then `/validate-scale`'s answer to it."""
    effective = target
    if pol.scale_down.clamps(user):
        mutated = answer_scale(request(KIND[resource], ns, name, current, target, user), VIEW,
                               pol, NOW, clamp=True)
        effective = mutated.clamp.replicas if mutated.outcome is ScaleOutcome.CLAMPED else target
    return effective, answer_scale(request(KIND[resource], ns, name, current, effective, user),
                                   VIEW, pol, NOW)


def test_the_webhook_answer_and_plan_agree_over_the_matrix():
    seen_verdicts: set[str] = set()
    seen_rules: set[str] = set()
    for policy_name, extra in POLICIES.items():
        pol = policy(extra)
        for resource, ns, name, current, targets in CASES:
            for target in targets:
                answer = answer_scale(request(KIND[resource], ns, name, current, target), VIEW,
                                      pol, NOW)
                doc = plan_workload(VIEW, pol, workload(resource, ns, name), target, NOW)
                where = f"policy {policy_name}, {resource} {ns}/{name} -> {target}"
                assert verdict(answer) == plan_verdict(doc), where
                assert (answer.outcome is ScaleOutcome.NOT_GOVERNED) is (not doc["governed"])
                assert answer.out_of_scope == doc["notCheckedBecause"], where
                seen_verdicts.add(verdict(answer)[2])
                seen_rules |= verdict(answer)[1]
    # The matrix is not trivially in agreement: every kind of answer occurs.
    assert seen_verdicts == {"allowed", "denied", "violation-warn", "violation-dryrun"}
    assert seen_rules == {"protectedLast", "minProtectedReplicas"}


def test_plan_as_a_requester_and_the_webhook_chain_agree_on_the_clamp():
    pol, clamps = policy(), set()
    for user in (HPA, ADMIN):
        for resource, ns, name, current, targets in CASES:
            for target in targets:
                effective, answer = chained(pol, resource, ns, name, current, target, user)
                doc = plan_workload(VIEW, pol, workload(resource, ns, name), target, NOW, user)
                where = f"{user}: {resource} {ns}/{name} -> {target}"
                assert doc["clampedTo"] == (None if effective == target else effective), where
                assert doc["allowed"] is verdict(answer)[0], where
                if doc["clampedTo"] is not None:
                    clamps.add("held" if effective == current else "lowered")
    assert clamps == {"held", "lowered"}  # both kinds of clamp occur


@pytest.mark.parametrize("enforcement", ["warn", "clamp"])
def test_plan_as_a_git_ops_controller_and_the_webhook_chain_agree(enforcement):
    pol = policy({"scaleDown": {"gitOps": {"users": [ARGOCD], "enforcement": enforcement}}})
    seen: set[str] = set()
    for resource, ns, name, current, targets in CASES:
        for target in targets:
            # A sync's write: an UPDATE of the workload itself, its old object in the request.
            effective, answer = chained(pol, resource, ns, name, current, target, ARGOCD)
            doc = plan_workload(VIEW, pol, workload(resource, ns, name), target, NOW, ARGOCD)
            where = f"{enforcement}: {resource} {ns}/{name} -> {target}"
            assert verdict(answer)[0] is True and doc["allowed"] is True, where
            assert doc["clampedTo"] == (None if effective == target else effective), where
            if doc["clampedTo"] is None:
                assert verdict(answer) == plan_verdict(doc), where
            seen.add("clamped" if doc["clampedTo"] is not None else plan_verdict(doc)[2])
    assert seen >= ({"violation-warn", "allowed"} if enforcement == "warn"
                    else {"clamped", "allowed"}), seen


def trainer_replicaset() -> dict[str, Any]:
    """A ReplicaSet an operator's Trainer sizes: its owner, not poolguard, decides."""
    trainer = {"apiVersion": "example.com/v1", "kind": "Trainer",
               "metadata": {"name": "t", "namespace": "ml", "uid": "trainer-uid"}}
    return f.replicaset("trained", "ml", replicas=3, owner=trainer)


def test_the_order_of_validate_scale():
    pol = policy({"scaleDown": {"exemptUsers": ["ci-bot"]}})
    owned = trainer_replicaset()
    # An exempt user first: even a scale-up of a workload nobody knows.
    exempt = answer_scale(request("Deployment", "ml", "nowhere", 1, 5, "ci-bot"), VIEW, pol,
                          NOW, view_problem=STALE)
    assert (exempt.outcome, exempt.note) == (ScaleOutcome.EXEMPT_USER,
                                             "ci-bot is in scaleDown.exemptUsers: never checked")
    # Not a scale-down: before the view's trust.
    up = answer_scale(request("Deployment", "ml", "costed", 4, 4), VIEW, pol, NOW,
                      view_problem=STALE)
    assert up.outcome is ScaleOutcome.NOT_SCALE_DOWN
    # Without a count in the request, the view's copy says it: 4 -> 4 is none.
    assert answer_scale(request("Deployment", "ml", "costed", None, 4), VIEW, pol,
                        NOW).outcome is ScaleOutcome.NOT_SCALE_DOWN
    # An owner-sized workload the view has not seen (the request's object stands in), even
    # with the view untrusted.
    owner = answer_scale(request("ReplicaSet", "ml", "trained", 3, 1, obj=owned), VIEW, pol,
                         NOW, view_problem=STALE)
    assert owner.outcome is ScaleOutcome.OWNER_DECIDED
    assert owner.owner is not None and owner.owner["kind"] == "Trainer"
    assert owner.note == ("sized by its owner Trainer t: poolguard never blocks a replica "
                          "change of it")
    # An untrusted view cannot say whether a workload is governed (skip-labelled here).
    stale = answer_scale(request("Deployment", "ml", "labelled-skip", 3, 2), VIEW, pol, NOW,
                         view_problem=STALE)
    assert (stale.outcome, stale.problem) == (ScaleOutcome.UNTRUSTED,
                                              "the cluster cache is 90s old")
    unknown = answer_scale(request("Deployment", "ml", "nowhere", 3, 2), VIEW, pol, NOW)
    assert (unknown.outcome, unknown.problem) == (
        ScaleOutcome.UNTRUSTED, "Deployment ml/nowhere is not in poolguard's cache")
    skipped = answer_scale(request("Deployment", "ml", "labelled-skip", 3, 2), VIEW, pol, NOW)
    assert skipped.outcome is ScaleOutcome.NOT_GOVERNED
    assert skipped.out_of_scope == ("Deployment ml/labelled-skip is labelled "
                                    "poolguard.dev/skip=true")
    judged = answer_scale(request("Deployment", "ml", "uncosted", 3, 2), VIEW, pol, NOW)
    assert judged.outcome is ScaleOutcome.JUDGED and judged.assessment is not None
    assert judged.assessment.verdict.allowed is False
    # plan previews the verdict itself: asked not to assess, the answer stops there.
    unassessed = answer_scale(request("Deployment", "ml", "uncosted", 3, 2), VIEW, pol, NOW,
                              assess=False)
    assert (unassessed.outcome, unassessed.assessment) == (ScaleOutcome.JUDGED, None)


def test_the_order_of_the_clamp():
    pol = policy({"scaleDown": {"exemptUsers": ["ci-bot"]}})
    # Not a scale-down, then the view's trust, before the requester and the owner.
    assert answer_scale(request("Deployment", "ml", "clampable", 4, 4, "ci-bot"), VIEW, pol,
                        NOW, clamp=True).outcome is ScaleOutcome.NOT_SCALE_DOWN
    assert answer_scale(request("Deployment", "ml", "clampable", 4, 1, "ci-bot"), VIEW, pol,
                        NOW, view_problem=STALE, clamp=True).outcome is ScaleOutcome.UNTRUSTED
    assert answer_scale(request("Deployment", "ml", "nowhere", 4, 1, "ci-bot"), VIEW, pol,
                        NOW, clamp=True).outcome is ScaleOutcome.UNTRUSTED
    assert answer_scale(request("Deployment", "ml", "clampable", 4, 1, "ci-bot"), VIEW, pol,
                        NOW, clamp=True).outcome is ScaleOutcome.EXEMPT_USER
    assert answer_scale(request("ReplicaSet", "ml", "trained", 3, 1, HPA, trainer_replicaset()),
                        VIEW, pol, NOW, view_problem=STALE,
                        clamp=True).outcome is ScaleOutcome.UNTRUSTED
    owned = answer_scale(request("ReplicaSet", "ml", "trained", 3, 1, HPA,
                                 trainer_replicaset()), VIEW, pol, NOW, clamp=True)
    assert owned.outcome is ScaleOutcome.OWNER_DECIDED
    clamped = answer_scale(request("Deployment", "ml", "clampable", 4, 1, HPA), VIEW, pol, NOW,
                           clamp=True)
    assert clamped.outcome is ScaleOutcome.CLAMPED and clamped.clamp is not None
    assert clamped.clamp.replicas == 3
    assert clamped.note.startswith("scaled Deployment ml/clampable from 4 to 3 replicas")
    assert answer_scale(request("Deployment", "ml", "costed", 4, 3, HPA), VIEW, pol, NOW,
                        clamp=True).outcome is ScaleOutcome.ALLOWED
    skipped = answer_scale(request("Deployment", "ml", "labelled-skip", 3, 2, HPA), VIEW, pol,
                           NOW, clamp=True)
    assert skipped.outcome is ScaleOutcome.NOT_GOVERNED
    assert "labelled poolguard.dev/skip=true" in (skipped.out_of_scope or "")
