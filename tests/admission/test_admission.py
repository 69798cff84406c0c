"""Admission decisions without HTTP: enforcement modes, fail-open/closed, scoping."""

from __future__ import annotations

import copy
import re

import pytest

from tests.support import factories as f
from tests.support import reviews
from webhook.admission.app import respond
from webhook.admission.handlers import (
    Context,
    review_binding,
    review_pod_create,
    review_scale,
    review_scale_clamp,
    review_workload,
)
from webhook.admission.review import BadReview, parse_review
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-02-01T00:00:00Z")
NODES = [f.node("inf-1", "inference"), f.node("hyb-1", "hybrid")]


def policy(**overrides):
    document = {"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                          {"name": "hybrid", "deletionCost": -100}], **overrides}
    return parse_policy(document)


def cluster() -> tuple[Snapshot, dict]:
    deploy = f.deployment("svc", replicas=3)
    rs = f.replicaset("svc-1", owner=deploy, replicas=3, pod_hash="1")
    # no costs yet: two pods share inf-1, so the ranking removes an inference pod first
    pods = [f.pod("svc-1-a", node_name="inf-1", owner=rs),
            f.pod("svc-1-b", node_name="inf-1", owner=rs),
            f.pod("svc-1-c", node_name="hyb-1", owner=rs)]
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": "ml", "labels": {"team": "ml"}}}
    return Snapshot([deploy, rs, namespace, *NODES, *pods]), deploy


def context(view, pol, **kwargs) -> Context:
    return Context(policy=pol, view=view, now_ns=lambda: NOW, **kwargs)


def decide(handler, request, ctx) -> dict:
    """The AdmissionResponse as the server sends it (through the one recording wrapper)."""
    return respond("/test", handler, request, ctx)


def scale_request(**kwargs):
    return parse_review(reviews.scale("deployments", "svc", 3, 2, **kwargs))


@pytest.mark.parametrize(("enforcement", "allowed", "verdict"), [
    ("enforce", False, "denied"),
    ("warn", True, "violation-warn"),
    ("dryrun", True, "violation-dryrun"),
])
def test_enforce_denies_warn_warns_dryrun_audits(enforcement, allowed, verdict):
    view, _ = cluster()
    answer = decide(review_scale, scale_request(),
                    context(view, policy(scaleDown={"enforcement": enforcement})))
    assert answer["allowed"] is allowed
    assert answer["auditAnnotations"]["verdict"] == verdict
    assert answer["auditAnnotations"]["rules"] == "protectedLast"
    if enforcement == "enforce":
        assert answer["status"]["code"] == 403
    if enforcement == "warn":
        assert answer["warnings"][0].startswith(
            "poolguard: scaling Deployment ml/svc from 3 to 2")
        assert all("\n" not in w and len(w) <= 256 for w in answer["warnings"])
    if enforcement == "dryrun":
        assert "warnings" not in answer


def test_dry_run_request_gets_the_same_answer():
    view, _ = cluster()
    ctx = context(view, policy())
    dry = decide(review_scale, scale_request(dry_run=True), ctx)
    real = decide(review_scale, scale_request(), ctx)
    assert dry["allowed"] is False and dry["status"]["code"] == 403
    assert {**dry, "uid": None} == {**real, "uid": None}


def test_exempt_users_and_configurable_list():
    view, _ = cluster()
    request = scale_request(user=reviews.DEPLOYMENT_CONTROLLER)
    assert decide(review_scale, request, context(view, policy()))["allowed"] is True
    custom = policy(scaleDown={"exemptUsers": ["ci-bot"]})
    assert decide(review_scale, request, context(view, custom))["allowed"] is False
    bot = scale_request(user={"username": "ci-bot"})
    assert decide(review_scale, bot, context(view, custom))["allowed"] is True


@pytest.mark.parametrize(("fail_closed", "allowed", "code"), [(False, True, None),
                                                              (True, False, 503)],
                         ids=["fail-open", "fail-closed"])
def test_untrusted_view_fails_open_or_closed_naming_the_problem(fail_closed, allowed, code):
    view, _ = cluster()
    stale = lambda: "the cluster cache is 90s old"  # noqa: E731
    answer = decide(review_scale, scale_request(),
                    context(view, policy(), view_problem=stale, fail_closed=fail_closed))
    assert answer["allowed"] is allowed
    assert answer.get("status", {}).get("code") == code
    told = answer["status"]["message"] if code else answer["warnings"][0]
    assert "poolguard could not check this scale-down: the cluster cache is 90s old" in told


def test_ungoverned_namespace_is_not_checked():
    view, _ = cluster()
    scoped = policy(namespaceSelector={"matchLabels": {"team": "other"}})
    answer = decide(review_scale, scale_request(), context(view, scoped))
    # allowed unchecked: no verdict in the audit log, no warnings (the same scale-down in
    # a governed namespace is denied, test_enforce_denies_warn_warns_dryrun_audits)
    assert answer == {"uid": answer["uid"], "allowed": True}


def test_workload_update_that_raises_replicas_passes_fast():
    view, deploy = cluster()
    new = copy.deepcopy(deploy)
    new["spec"]["replicas"] = 5
    request = parse_review(reviews.workload_update(deploy, new))
    answer = decide(review_scale, request, context(view, policy()))
    assert answer == {"uid": answer["uid"], "allowed": True}  # not judged: no audit verdict


def test_binding_for_a_pod_not_yet_cached_is_left_to_the_reconciler():
    view, _ = cluster()
    ctx = context(view, policy())
    answer = decide(review_binding, parse_review(reviews.binding("unknown", "hyb-1")), ctx)
    assert answer == {"uid": answer["uid"], "allowed": True}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r["request"].pop("uid"), "request.uid"),
        (lambda r: r["request"].update(object=[1]), "request.object: must be an object"),
        (lambda r: r["request"].update(operation=5), "request.operation: must be a string"),
        (lambda r: r.update(kind="Review"), "kind must be AdmissionReview"),
    ],
)
def test_parse_review_names_the_problem(mutate, message):
    body = reviews.scale("deployments", "svc", 3, 2)
    mutate(body)
    with pytest.raises(BadReview, match=re.escape(message)):
        parse_review(body)


def test_negative_replicas_in_a_scale_is_a_bad_review():
    body = reviews.scale("deployments", "svc", 3, 2)
    body["request"]["object"]["spec"]["replicas"] = -1
    view, _ = cluster()
    with pytest.raises(BadReview, match=r"spec\.replicas"):
        decide(review_scale, parse_review(body), context(view, policy()))


def test_scale_to_zero_omits_replicas_and_is_judged_as_zero():
    view, _ = cluster()
    body = reviews.scale("deployments", "svc", 3, 0)
    del body["request"]["object"]["spec"]["replicas"]  # autoscaling/v1 omits a zero
    ctx = context(view, policy())
    answer = decide(review_scale, parse_review(body), ctx)
    assert answer["allowed"] is True  # every pod goes: nothing survives outside protection
    assert answer["auditAnnotations"]["victims"].count("svc-1-") == 3


def test_skip_label_takes_a_pod_out_of_scope():
    view, _ = cluster()
    ctx = context(view, policy())
    governed = f.pod("governed", node_name="hyb-1")
    assert decide(review_pod_create, parse_review(reviews.pod_create(governed)), ctx)["patch"]
    pod = f.pod("skipped", node_name="hyb-1", labels={"poolguard.dev/skip": "true"})
    answer = decide(review_pod_create, parse_review(reviews.pod_create(pod)), ctx)
    assert answer == {"uid": answer["uid"], "allowed": True}


def test_fail_closed_holds_before_the_governed_check():
    # unsynced view, a namespace selector, and a workload UPDATE whose Deployment the
    # cache has not seen: still an unchecked scale-down, so fail-closed denies it
    view = Snapshot([])
    deploy = f.deployment("svc", replicas=3)
    fewer = copy.deepcopy(deploy)
    fewer["spec"]["replicas"] = 1
    ctx = context(view, policy(namespaceSelector={"matchLabels": {"team": "ml"}}),
                  view_problem=lambda: "the cluster cache has not synced yet", fail_closed=True)
    answer = decide(review_scale, parse_review(reviews.workload_update(deploy, fewer)), ctx)
    assert answer["allowed"] is False and answer["status"]["code"] == 503


def test_warn_mode_keeps_the_whole_message_and_the_fix():
    view, _ = cluster()
    answer = decide(review_scale, scale_request(),
                    context(view, policy(scaleDown={"enforcement": "warn"})))
    text = " ".join(answer["warnings"])
    assert "svc-1-c (node hyb-1, pool hybrid)" in text  # the surviving hybrid pod
    assert ("poolguard fix: give the surviving pod outside protected pools a cost below 0, "
            "then retry: kubectl annotate pod -n ml svc-1-c "
            "controller.kubernetes.io/pod-deletion-cost=-100 --overwrite") in answer["warnings"]
    assert all(len(w) <= 256 and "\n" not in w for w in answer["warnings"])


def test_denial_carries_the_hints_as_warnings():
    view, _ = cluster()
    answer = decide(review_scale, scale_request(), context(view, policy()))
    assert answer["allowed"] is False
    assert any("reconcile" in w for w in answer["warnings"])


def test_template_update_may_change_an_already_invalid_cost():
    deploy = f.deployment("svc", replicas=3)
    deploy["spec"]["template"]["metadata"]["annotations"] = {reviews_cost(): "abc"}
    changed = copy.deepcopy(deploy)
    changed["spec"]["template"]["metadata"]["annotations"] = {reviews_cost(): "abcd"}
    view, _ = cluster()
    ctx = context(view, policy())
    answer = decide(review_workload, parse_review(reviews.workload_update(deploy, changed)), ctx)
    assert answer["allowed"] is True  # as the API server's AllowInvalidPodDeletionCost
    valid = copy.deepcopy(deploy)
    valid["spec"]["template"]["metadata"]["annotations"] = {reviews_cost(): "5"}
    broken = copy.deepcopy(deploy)
    broken["spec"]["template"]["metadata"]["annotations"] = {reviews_cost(): "05"}
    answer = decide(review_workload, parse_review(reviews.workload_update(valid, broken)), ctx)
    assert answer["allowed"] is False and answer["status"]["code"] == 422


def reviews_cost() -> str:
    return "controller.kubernetes.io/pod-deletion-cost"


def test_statefulset_advice_does_not_talk_about_deletion_cost():
    sts = f.statefulset("kv", replicas=3)
    pods = [f.pod(f"kv-{i}", node_name=node, owner=sts)
            for i, node in enumerate(["hyb-1", "inf-1", "inf-1"])]
    view = Snapshot([sts, *NODES, *pods])
    answer = decide(review_scale, parse_review(reviews.scale("statefulsets", "kv", 3, 2)),
                          context(view, policy()))
    message = answer["status"]["message"]
    assert "kv-2" in message and "highest ordinals" in message
    assert "deletion cost" not in message
    assert not any("deletion cost" in w for w in answer.get("warnings", []))


def test_a_statefulset_that_stalls_names_the_blocked_pods_in_the_audit():
    """OrderedReady, kv-0 and kv-1 not ready: kv-2 goes now; the controller stops at kv-1
    (not Running and Ready, and not the first unavailable pod, kv-0) until kv-1 is
    healthy: the audit log says which pods wait and on which, apart from the victims."""
    sts = f.statefulset("kv", replicas=3)
    sts["spec"]["podManagementPolicy"] = "OrderedReady"
    pods = [f.pod("kv-0", node_name="hyb-1", owner=sts, ready=False),
            f.pod("kv-1", node_name="hyb-1", owner=sts, ready=False),
            f.pod("kv-2", node_name="hyb-1", owner=sts)]
    view = Snapshot([sts, *NODES, *pods])
    answer = decide(review_scale, parse_review(reviews.scale("statefulsets", "kv", 3, 0)),
                    context(view, policy()))
    audit = answer["auditAnnotations"]
    assert audit["victims"] == "kv-2"
    assert audit["blocked"] == "kv-1(waits on kv-1),kv-0(waits on kv-1)"


@pytest.mark.parametrize(("mode", "allowed", "verdict"), [
    ("clamp", False, "denied"),  # unclamped (the mutating webhook skipped): as people's
    ("enforce", False, "denied"),
    ("warn", True, "violation-warn"),
    ("dryrun", True, "violation-dryrun"),
])
def test_autoscalers_are_judged_with_their_own_enforcement(mode, allowed, verdict):
    view, _ = cluster()
    pol = policy(scaleDown={"autoscalers": {"enforcement": mode}})
    answer = decide(review_scale, scale_request(user=reviews.HPA), context(view, pol))
    assert answer["allowed"] is allowed
    assert answer["auditAnnotations"]["verdict"] == verdict
    person = decide(review_scale, scale_request(), context(view, pol))
    assert person["allowed"] is False  # people keep scaleDown.enforcement


@pytest.mark.parametrize("mode", ["enforce", "warn", "dryrun"])
def test_mutate_scale_clamps_only_under_clamp(mode):
    view, _ = cluster()
    request = scale_request(user=reviews.HPA)
    clamping = decide(review_scale_clamp, request, context(view, policy()))
    assert clamping["patchType"] == "JSONPatch"  # kept at 3: every lower count is unsafe
    other = policy(scaleDown={"autoscalers": {"enforcement": mode}})
    answer = decide(review_scale_clamp, request, context(view, other))
    assert answer == {"uid": request["uid"], "allowed": True}


def test_mutate_scale_passes_what_it_cannot_check():
    view, _ = cluster()
    request = scale_request(user=reviews.HPA)
    stale = decide(review_scale_clamp, request,
                   context(view, policy(), view_problem=lambda: "cache stale"))
    assert stale == {"uid": request["uid"], "allowed": True}
    unknown = parse_review(reviews.scale("deployments", "ghost", 3, 1, via="hpa"))
    assert decide(review_scale_clamp, unknown, context(view, policy())) == {
        "uid": unknown["uid"], "allowed": True}
