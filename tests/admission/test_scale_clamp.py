"""`POST /mutate-scale` over real HTTPS: an autoscaler's unsafe scale-down is clamped.

The example cluster's Deployment ml/llm-serve runs 6 pods; a scale to 3 would remove an
inference pod while a hybrid pod survives, and 4 is the smallest safe count (the count
the denial's fix names). Patches are applied to the original object with a JSON-Patch
library, then the result goes through `/validate-scale`, as the API server chains them.
"""

from __future__ import annotations

import copy

import jsonpatch
import pytest
import yaml

from tests.support import reviews
from tests.support.serving import admission_response as post
from tests.support.serving import patched
from webhook.cluster.state import EXAMPLE_STATE

STATE = yaml.safe_load(EXAMPLE_STATE.read_text())
KNATIVE = {"username": "system:serviceaccount:knative-serving:controller",
           "groups": ["system:serviceaccounts", "system:authenticated"]}
KEDA = {"username": "system:serviceaccount:keda:keda-operator",
        "groups": ["system:serviceaccounts", "system:authenticated"]}
CLAMPED = 'poolguard_scale_clamped_total{kind="Deployment",namespace="ml"}'




def with_object(body: dict, obj: dict) -> dict:
    """The review the next webhook in the chain gets: the mutated object, a new uid."""
    chained = copy.deepcopy(body)
    chained["request"]["object"] = obj
    chained["request"]["uid"] += "-next"
    return chained


def clamped_count(server) -> float:
    url, session = server
    for line in session.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(CLAMPED + " "):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.parametrize("user", [reviews.HPA, KEDA], ids=["hpa", "keda"])
def test_autoscaler_scale_down_is_clamped_to_the_safe_count_and_then_allowed(server, user):
    body = reviews.scale("deployments", "llm-serve", 6, 3, via="hpa", user=user)
    response = post(server, "/mutate-scale", body)
    assert response["allowed"] is True
    scale = patched(response, body["request"]["object"])
    assert scale["spec"]["replicas"] == 4
    assert {k: v for k, v in scale.items() if k != "spec"} == {
        k: v for k, v in body["request"]["object"].items() if k != "spec"}
    assert response["warnings"][0].startswith(
        "poolguard: scaled Deployment ml/llm-serve from 6 to 4 replicas, not the 3 asked")
    assert any("[protectedLast]" in w for w in response["warnings"])
    assert all(len(w) <= 256 and "\n" not in w for w in response["warnings"])
    assert response["auditAnnotations"] == {"clamped": "6->3 became 6->4",
                                            "rules": "protectedLast"}
    validated = post(server, "/validate-scale", with_object(body, scale))
    assert validated["allowed"] is True
    assert validated["auditAnnotations"]["verdict"] == "allowed"
    # reinvocation with the clamped count changes nothing
    again = post(server, "/mutate-scale", with_object(body, scale))
    assert again == {"uid": again["uid"], "allowed": True}


def test_knative_patch_of_the_deployments_replicas_is_clamped(server):
    old = next(o for o in STATE["items"]
               if o["kind"] == "Deployment" and o["metadata"]["name"] == "llm-serve")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 3
    body = reviews.workload_update(old, new, user=KNATIVE)
    response = post(server, "/mutate-scale", body)
    deployment = patched(response, new)
    assert deployment["spec"]["replicas"] == 4
    assert jsonpatch.make_patch(new, deployment).patch == [
        {"op": "replace", "path": "/spec/replicas", "value": 4}]
    assert post(server, "/validate-scale", with_object(body, deployment))["allowed"] is True


@pytest.mark.parametrize(("user", "new"), [
    (reviews.ADMIN, 3),  # a person is judged (and denied) by /validate-scale instead
    (reviews.DEPLOYMENT_CONTROLLER, 3),
    (reviews.HPA, 4),  # safe as asked
    (reviews.HPA, 8),  # a scale-up
], ids=["person", "deployment-controller", "safe", "scale-up"])
def test_everything_else_passes_unchanged(server, user, new):
    body = reviews.scale("deployments", "llm-serve", 6, new, user=user)
    response = post(server, "/mutate-scale", body)
    assert response == {"uid": response["uid"], "allowed": True}


def test_a_persons_unsafe_scale_is_still_denied_after_passing_the_mutation(server):
    body = reviews.scale("deployments", "llm-serve", 6, 3, via="kubectl")
    assert "patch" not in post(server, "/mutate-scale", body)
    denied = post(server, "/validate-scale", body)
    assert denied["allowed"] is False and denied["status"]["code"] == 403


def test_dry_run_gets_the_same_answer_and_is_not_counted(server):
    before = clamped_count(server)
    dry = post(server, "/mutate-scale",
               reviews.scale("deployments", "llm-serve", 6, 3, via="hpa", dry_run=True))
    assert dry["patchType"] == "JSONPatch" and dry["auditAnnotations"]["clamped"]
    assert clamped_count(server) == before
    real = post(server, "/mutate-scale", reviews.scale("deployments", "llm-serve", 6, 3,
                                                       via="hpa"))
    assert {**dry, "uid": None} == {**real, "uid": None}
    assert clamped_count(server) == before + 1
