"""Admission routing of LeaderWorkerSets and Argo Rollouts, by API group and resource.

`leaderworkersets/scale`, `rollouts/scale` and `spec.replicas` updates of both reach the
scale check and the clamp like the apps/v1 kinds; another API group's `rollouts` is not
an Argo Rollout; template validation stays with the apps/v1 kinds.
"""

from __future__ import annotations

import base64
import copy
import json

import pytest

from tests.support import factories as f
from tests.support import reviews, rollouts
from tests.support.lws_factories import leader_worker_set, lws_state
from tests.support.rollouts import rollout as argo_rollout
from webhook.admission.app import respond
from webhook.admission.handlers import (
    Context,
    Outcome,
    review_scale,
    review_scale_clamp,
    review_workload,
)
from webhook.admission.review import parse_review
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-02-01T00:00:00Z")
LWS_GROUP, RO_GROUP = "leaderworkerset.x-k8s.io", "argoproj.io"
# (resource, API group, version, kind, the object in the cache)
KINDS = {
    "lws": ("leaderworkersets", LWS_GROUP, "v1", "LeaderWorkerSet",
            leader_worker_set("llm", replicas=3)),
    "rollout": ("rollouts", RO_GROUP, "v1alpha1", "Rollout", argo_rollout("llm", 3)),
}
KIND_IDS = sorted(KINDS)


def policy(**overrides):
    return parse_policy({"pools": [{"name": "inference", "deletionCost": 1000,
                                    "protected": True},
                                   {"name": "hybrid", "deletionCost": -100}], **overrides})


def context(*objects, **kwargs) -> Context:
    view = Snapshot([f.node("inf-1", "inference"), f.node("hyb-1", "hybrid"), *objects])
    return Context(policy=kwargs.pop("pol", policy()), view=view, now_ns=lambda: NOW,
                   **kwargs)


def scale(key: str, old: int = 3, new: int = 2, **kwargs):
    resource, group, version, _, _ = KINDS[key]
    return parse_review(reviews.scale(resource, "llm", old, new, group=group, version=version,
                                      **kwargs))


def replicas_update(key: str, old: int = 3, new: int = 2, **kwargs):
    obj = copy.deepcopy(KINDS[key][4])
    obj["spec"]["replicas"] = old
    changed = copy.deepcopy(obj)
    changed["spec"]["replicas"] = new
    return parse_review(reviews.workload_update(obj, changed, **kwargs))


@pytest.mark.parametrize("key", KIND_IDS)
def test_a_scale_down_not_in_the_cache_is_checked_as_its_kind(key):
    """A /scale of the kind the group names, not in the cache: it fails open or closed
    with the same message as for a Deployment."""
    kind = KINDS[key][3]
    opened = respond("/validate-scale", review_scale, scale(key), context())
    assert opened["allowed"] is True
    assert " ".join(opened["warnings"]) == (f"poolguard could not check this scale-down: "
                                            f"{kind} ml/llm is not in poolguard's cache")
    closed = respond("/validate-scale", review_scale, scale(key), context(fail_closed=True))
    assert closed["allowed"] is False and closed["status"]["code"] == 503
    assert closed["status"]["message"] == (f"poolguard could not check this scale-down: "
                                           f"{kind} ml/llm is not in poolguard's cache; "
                                           "retry shortly")


@pytest.mark.parametrize("key", KIND_IDS)
def test_a_replicas_update_not_in_the_cache_is_judged_on_its_old_object(key):
    """An UPDATE's oldObject stands in for a workload the cache has not seen: its skip
    label is read (allowed, nothing said), as for the apps kinds."""
    request = replicas_update(key)
    request["oldObject"]["metadata"]["labels"] = {"poolguard.dev/skip": "true"}
    decision = review_scale(request, context(fail_closed=True))
    assert (decision.outcome, decision.response["allowed"]) == (Outcome.NOT_GOVERNED, True)
    assert "warnings" not in decision.response


@pytest.mark.parametrize("key", KIND_IDS)
def test_the_cached_workload_is_read_by_kind(key):
    """The cache's LeaderWorkerSet or Rollout is the workload judged: its skip label puts
    the scale-down out of scope (allowed, nothing said), a scale-up is no scale-down."""
    skipped = copy.deepcopy(KINDS[key][4])
    skipped["metadata"]["labels"] = {"poolguard.dev/skip": "true"}
    ctx = context(skipped)
    decision = review_scale(scale(key), ctx)
    assert (decision.outcome, decision.response["allowed"]) == (Outcome.NOT_GOVERNED, True)
    assert "warnings" not in decision.response
    assert review_scale(scale(key, 2, 3), ctx).outcome == Outcome.NOT_SCALE_DOWN
    # the Scale's old count is the workload's, whatever the cache holds
    assert review_scale(replicas_update(key, 2, 4), ctx).outcome == Outcome.NOT_SCALE_DOWN


@pytest.mark.parametrize("key", KIND_IDS)
def test_exempt_users_and_a_stale_cache_answer_as_for_deployments(key):
    ctx = context(KINDS[key][4], pol=policy(scaleDown={"exemptUsers": ["ci-bot"]}))
    exempt = review_scale(scale(key, user={"username": "ci-bot"}), ctx)
    assert (exempt.outcome, exempt.response["allowed"]) == (Outcome.EXEMPT_USER, True)
    stale = context(KINDS[key][4], view_problem=lambda: "the cluster cache is 90s old")
    answer = respond("/validate-scale", review_scale, scale(key), stale)
    assert answer["warnings"] == ["poolguard could not check this scale-down: the cluster "
                                  "cache is 90s old"]


@pytest.mark.parametrize("key", KIND_IDS)
def test_the_clamp_sees_an_autoscalers_scale_of_the_kind(key):
    """An HPA shrinking a LeaderWorkerSet or Rollout poolguard has not seen passes
    unchanged as unchecked (not ignored: the clamp did look)."""
    decision = review_scale_clamp(scale(key, via="hpa"), context())
    assert decision.outcome == Outcome.UNCHECKED_ALLOWED
    assert decision.response["allowed"] is True and "patch" not in decision.response
    other_group = parse_review(reviews.scale(KINDS[key][0], "llm", 3, 2, via="hpa",
                                             group="example.com", version="v1"))
    assert review_scale_clamp(other_group, context()).outcome == Outcome.IGNORED


@pytest.mark.parametrize("key", KIND_IDS)
def test_another_groups_resource_of_the_same_name_is_ignored(key):
    resource, _, _, _, obj = KINDS[key]
    foreign = parse_review(reviews.scale(resource, "llm", 3, 2, group="example.com",
                                         version="v1"))
    ctx = context(obj, fail_closed=True)  # a checked request would be denied: none here
    decision = review_scale(foreign, ctx)
    assert decision.outcome == Outcome.IGNORED
    assert decision.response == {"uid": foreign["uid"], "allowed": True}


def test_apps_kinds_are_routed_as_before():
    """apps/v1 requests with their group, and without one (the apps resource of that
    name, as always); a custom group's `deployments` is not a Deployment."""
    deploy = f.deployment("svc", replicas=3)
    deploy["metadata"]["labels"] = {"poolguard.dev/skip": "true"}
    ctx = context(deploy)
    request = parse_review(reviews.scale("deployments", "svc", 3, 2))
    assert review_scale(request, ctx).outcome == Outcome.NOT_GOVERNED
    no_group = copy.deepcopy(request)
    del no_group["resource"]["group"]
    assert review_scale(no_group, ctx).outcome == Outcome.NOT_GOVERNED
    custom = parse_review(reviews.scale("deployments", "svc", 3, 2, group="example.com"))
    assert review_scale(custom, ctx).outcome == Outcome.IGNORED
    for resource in ("leaderworkersets", "rollouts"):  # custom plurals need their group
        apps_named = parse_review(reviews.scale(resource, "svc", 3, 2))
        assert review_scale(apps_named, ctx).outcome == Outcome.IGNORED


@pytest.mark.parametrize("key", KIND_IDS)
def test_template_costs_are_checked_for_the_apps_kinds_only(key):
    """The API server validates the pod templates of its own kinds: a custom resource's
    template is not refused (its controller's pods are checked when created)."""
    obj = copy.deepcopy(KINDS[key][4])
    template = (obj["spec"]["leaderWorkerTemplate"]["workerTemplate"] if key == "lws"
                else obj["spec"]["template"])
    template["metadata"]["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": "x"}
    decision = review_workload(parse_review(reviews.workload_create(obj)), context())
    assert (decision.outcome, decision.response["allowed"]) == (Outcome.IGNORED, True)
    deploy = f.deployment("svc")
    deploy["spec"]["template"]["metadata"]["annotations"] = {
        "controller.kubernetes.io/pod-deletion-cost": "x"}
    denied = review_workload(parse_review(reviews.workload_create(deploy)), context())
    assert denied.response["allowed"] is False


# ----- judged end to end (the LeaderWorkerSet prediction) --------------------------------


def lws_context(**kwargs) -> Context:
    """Three groups of two: group 0 on the hybrid pool, groups 1 and 2 on the inference pool."""
    _, objects = lws_state([["hyb-1", "hyb-1"], ["inf-1", "inf-1"], ["inf-1", "inf-1"]])
    return context(*objects, **kwargs)


LWS_DENIAL = ("poolguard: scaling LeaderWorkerSet ml/llm from 3 to 2 breaks the "
              "inference-pool policy: [protectedLast] would delete protected-pool pods llm-2 "
              "(node inf-1, pool inference), llm-2-1 (node inf-1, pool inference) while")


@pytest.mark.parametrize("via", ["scale", "replicas"])
def test_an_unsafe_leaderworkerset_scale_down_is_denied_like_a_deployments(via):
    request = scale("lws") if via == "scale" else replicas_update("lws")
    if via == "replicas":  # the cache's LeaderWorkerSet, as lws_state builds it
        request["oldObject"] = copy.deepcopy(lws_context().view.workload(
            "LeaderWorkerSet", "ml", "llm"))
        request["object"] = copy.deepcopy(request["oldObject"])
        request["object"]["spec"]["replicas"] = 2
    answer = respond("/validate-scale", review_scale, request, lws_context())
    assert answer["allowed"] is False and answer["status"]["code"] == 403
    assert answer["status"]["message"].startswith(LWS_DENIAL)
    assert answer["auditAnnotations"] == {"victims": "llm-2,llm-2-1", "verdict": "denied",
                                          "rules": "protectedLast"}
    warned = respond("/validate-scale", review_scale, request,
                     lws_context(pol=policy(scaleDown={"enforcement": "warn"})))
    assert warned["allowed"] is True
    assert warned["warnings"][0].startswith("poolguard: scaling LeaderWorkerSet ml/llm from 3 "
                                            "to 2 breaks the policy (enforcement: warn)")
    assert warned["auditAnnotations"]["verdict"] == "violation-warn"


def test_an_autoscalers_leaderworkerset_scale_down_is_clamped():
    answer = respond("/mutate-scale", review_scale_clamp, scale("lws", 3, 1, via="hpa"),
                     lws_context())
    assert answer["allowed"] is True
    assert json.loads(base64.b64decode(answer["patch"])) == [
        {"op": "replace", "path": "/spec/replicas", "value": 3}]
    assert answer["auditAnnotations"] == {"clamped": "3->1 became 3->3",
                                          "rules": "protectedLast"}


def rollout_context(**kwargs) -> Context:
    """A Rollout at steady state: its stable ReplicaSet has two pods on the inference pool
    and one on the hybrid pool, none with a deletion cost yet."""
    owner = rollouts.rollout("llm", 3, current="abc", stable="abc")
    stable = rollouts.replicaset(owner, "abc", 3, revision=1)
    pods = [f.pod(f"llm-abc-{suffix}", node_name=node, owner=stable)
            for suffix, node in (("a", "inf-1"), ("b", "inf-1"), ("c", "hyb-1"))]
    return context(owner, stable, *pods, **kwargs)


@pytest.mark.parametrize("via", ["scale", "replicas"])
def test_an_unsafe_rollout_scale_down_is_denied_like_a_deployments(via):
    request = scale("rollout")
    if via == "replicas":
        request = replicas_update("rollout")
        request["oldObject"] = copy.deepcopy(rollout_context().view.workload("Rollout", "ml",
                                                                             "llm"))
        request["object"] = copy.deepcopy(request["oldObject"])
        request["object"]["spec"]["replicas"] = 2
    answer = respond("/validate-scale", review_scale, request, rollout_context())
    assert answer["allowed"] is False and answer["status"]["code"] == 403
    assert answer["status"]["message"].startswith(
        "poolguard: scaling Rollout ml/llm from 3 to 2 breaks the inference-pool policy: "
        "[protectedLast] would delete protected-pool pod llm-abc-")
    assert answer["auditAnnotations"]["verdict"] == "denied"
    assert answer["auditAnnotations"]["rules"] == "protectedLast"


def test_an_autoscalers_rollout_scale_down_is_clamped():
    answer = respond("/mutate-scale", review_scale_clamp, scale("rollout", 3, 2, via="hpa"),
                     rollout_context())
    assert answer["allowed"] is True
    assert json.loads(base64.b64decode(answer["patch"])) == [
        {"op": "replace", "path": "/spec/replicas", "value": 3}]
    assert answer["auditAnnotations"]["clamped"] == "3->2 became 3->3"
