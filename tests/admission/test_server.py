"""The admission server over real HTTPS, called the way the API server calls it."""

from __future__ import annotations

import copy
import socket
import ssl
import warnings
from urllib.parse import urlparse

import pytest
import yaml

from tests.support import factories as f
from tests.support import reviews
from tests.support.serving import admission_response as post
from tests.support.serving import patched as apply
from webhook.cluster.state import EXAMPLE_STATE
from webhook.core.policy.policy import default_policy

COST = "controller.kubernetes.io/pod-deletion-cost"
MARK = "poolguard.dev/managed-deletion-cost"
STATE = yaml.safe_load(EXAMPLE_STATE.read_text())


def state_object(kind: str, name: str) -> dict:
    return copy.deepcopy(next(o for o in STATE["items"]
                              if o["kind"] == kind and o["metadata"]["name"] == name))


# --- pods CREATE ------------------------------------------------------------------------


def test_pod_on_hybrid_node_gets_cost_and_annotations_map(server):
    pod = f.pod("web-1", node_name="gpu-hyb-1")
    response = post(server, "/mutate-pods", reviews.pod_create(pod))
    assert response["allowed"] is True
    patched = apply(response, pod)
    assert patched["metadata"]["annotations"] == {
        COST: "-100", MARK: "-100", "poolguard.dev/pool": "hybrid"}
    patched["metadata"].pop("annotations")
    assert patched == pod  # nothing else changed


def test_pinned_pool_keeps_other_annotations_and_reinvocation_is_a_no_op(server):
    pod = f.pod("web-2", node_name=None, annotations={"team.example.com/owner": "ml",
                                                      "a/b~c": "x"})
    pod["spec"]["nodeSelector"] = {"node.usage": "inference"}
    response = post(server, "/mutate-pods", reviews.pod_create(pod))
    patched = apply(response, pod)
    assert patched["metadata"]["annotations"] == {
        "team.example.com/owner": "ml", "a/b~c": "x", COST: "1000", MARK: "1000",
        "poolguard.dev/pool": "inference"}
    again = post(server, "/mutate-pods", reviews.pod_create(patched))
    assert again == {"uid": again["uid"], "allowed": True}  # no patch on reinvocation


def test_persons_cost_is_kept(server):
    pod = f.pod("web-3", node_name="gpu-inf-1", cost="5")
    response = post(server, "/mutate-pods", reviews.pod_create(pod))
    assert response["allowed"] is True and "patch" not in response


def test_pool_unknown_at_create_is_left_to_the_binding(server):
    response = post(server, "/mutate-pods", reviews.pod_create(f.pod("web-4", node_name=None)))
    assert response["allowed"] is True and "patch" not in response


@pytest.mark.parametrize("value", ["+10", "007", "", "2147483648", "1_000", " 1"])
def test_invalid_cost_is_denied_with_the_api_server_message(server, value):
    pod = f.pod("web-5", cost=value)
    response = post(server, "/mutate-pods", reviews.pod_create(pod))
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert response["status"]["message"] == (
        f'Pod "web-5" is invalid: metadata.annotations[{COST}]: '
        f'Invalid value: "{value}": must be a 32bit integer')


def test_dry_run_pod_gets_the_same_answer(server):
    pod = f.pod("web-6", node_name="gpu-inf-2")
    dry = post(server, "/mutate-pods", reviews.pod_create(pod, dry_run=True))
    real = post(server, "/mutate-pods", reviews.pod_create(pod))
    assert apply(dry, pod)["metadata"]["annotations"][COST] == "1000"
    assert {**dry, "uid": None} == {**real, "uid": None}


# --- pods/binding -----------------------------------------------------------------------


def test_binding_gets_the_target_pools_cost(server):
    body = reviews.binding("gpu-probe-2abcd", "gpu-hyb-2")
    response = post(server, "/mutate-bindings", body)
    patched = apply(response, body["request"]["object"])
    annotations = patched["metadata"]["annotations"]
    # the hybrid pool consolidates: a node rank inside its band, marked as poolguard's
    band = default_policy().pool_by_name("hybrid").band
    assert annotations == {COST: annotations[COST], MARK: annotations[COST],
                           "poolguard.dev/pool": "hybrid"}
    assert band.low <= int(annotations[COST]) < band.high
    assert patched["target"] == {"kind": "Node", "name": "gpu-hyb-2"}


def test_binding_keeps_existing_binding_annotations(server):
    body = reviews.binding("gpu-probe-2abcd", "gpu-inf-1", annotations={"x.io/y": "z"})
    patched = apply(post(server, "/mutate-bindings", body), body["request"]["object"])
    assert patched["metadata"]["annotations"]["x.io/y"] == "z"
    assert patched["metadata"]["annotations"][COST] == "1000"


def test_binding_of_a_pod_with_a_persons_cost_is_untouched(server):
    # llm-serve-...-k4z9s carries a hand-set 2000 in the example state
    response = post(server, "/mutate-bindings",
                    reviews.binding("llm-serve-7c9d8f6b5-k4z9s", "gpu-inf-1"))
    assert response["allowed"] is True and "patch" not in response


# --- scale ------------------------------------------------------------------------------


def test_kubectl_scale_that_removes_an_inference_pod_is_denied(server):
    response = post(server, "/validate-scale",
                    reviews.scale("deployments", "llm-serve", 6, 3, via="kubectl"))
    assert response["allowed"] is False
    assert "patch" not in response and "patchType" not in response
    status = response["status"]
    assert status["code"] == 403 and status["reason"] == "Forbidden"
    message = status["message"]
    assert message.startswith("poolguard: scaling Deployment ml/llm-serve from 6 to 3")
    assert "[protectedLast]" in message and "pool inference" in message
    assert "llm-serve-7c9d8f6b5-k4z9s" in message  # the hybrid pod that survives
    assert "fix: scale to 4 replicas for now" in message
    audit = response["auditAnnotations"]
    assert audit["verdict"] == "denied" and audit["rules"] == "protectedLast"
    assert "llm-serve-7c9d8f6b5-h2w5d" in audit["victims"]


def test_hpa_scale_that_removes_only_hybrid_pods_is_allowed(server):
    response = post(server, "/validate-scale",
                    reviews.scale("deployments", "llm-serve", 6, 4, via="hpa"))
    assert response["allowed"] is True
    assert response["auditAnnotations"]["verdict"] == "allowed"


@pytest.mark.parametrize("new", [6, 9], ids=["unchanged", "scale-up"])
def test_scale_up_and_unchanged_pass_unjudged(server, new):
    response = post(server, "/validate-scale", reviews.scale("deployments", "llm-serve", 6, new))
    assert response == {"uid": response["uid"], "allowed": True}  # no audit verdict


def test_deployment_update_lowering_replicas_is_judged(server):
    old = state_object("Deployment", "llm-serve")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 3
    response = post(server, "/validate-scale", reviews.workload_update(old, new))
    assert response["allowed"] is False and "[protectedLast]" in response["status"]["message"]


def test_deployment_controllers_own_replicaset_update_is_exempt(server):
    old = state_object("ReplicaSet", "llm-serve-7c9d8f6b5")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 1
    response = post(server, "/validate-scale", reviews.workload_update(
        old, new, user=reviews.DEPLOYMENT_CONTROLLER))
    assert response == {"uid": response["uid"], "allowed": True}


# to 2: kv-cache-2 is on a hybrid node; to 1: every hybrid pod goes too, so nothing
# survives outside the inference pool
@pytest.mark.parametrize("new", [2, 1], ids=["only-hybrid-goes", "nothing-left-outside"])
def test_statefulset_scale_removing_only_hybrid_then_inference(server, new):
    response = post(server, "/validate-scale", reviews.scale("statefulsets", "kv-cache", 3, new))
    assert response["allowed"] is True
    assert response["auditAnnotations"]["verdict"] == "allowed"


def test_unknown_workload_is_allowed_with_a_warning(server):
    response = post(server, "/validate-scale", reviews.scale("deployments", "ghost", 3, 1))
    assert response["allowed"] is True
    assert "not in poolguard's cache" in response["warnings"][0]


# --- workloads --------------------------------------------------------------------------


def test_workload_template_with_invalid_cost_is_denied_with_field_path(server):
    deployment = f.deployment("bad", replicas=2)
    deployment["spec"]["template"]["metadata"]["annotations"] = {COST: "+5"}
    response = post(server, "/validate-workloads", reviews.workload_create(deployment))
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert (f'spec.template.annotations[{COST}]: Invalid value: "+5": '
            "must be a 32bit integer") in response["status"]["message"]
    sts = f.statefulset("ok")
    sts["spec"]["template"]["metadata"]["annotations"] = {COST: "-7"}
    assert post(server, "/validate-workloads", reviews.workload_create(sts))["allowed"] is True


# --- bad input, health, metrics ---------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "headers", "status", "needle"),
    [
        (b"{not json", {"Content-Type": "application/json"}, 400, "not valid JSON"),
        (b"[]", {"Content-Type": "application/json"}, 400, "JSON object"),
        (b'{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}',
         {"Content-Type": "application/json"}, 400, "apiVersion must be admission.k8s.io/v1"),
        (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}',
         {"Content-Type": "application/json"}, 400, "request.uid"),
        (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}',
         {"Content-Type": "application/json"}, 400, "request: missing"),
        (b"{}", {"Content-Type": "text/plain"}, 415, "application/json"),
        (b"[" * 100000 + b"]" * 100000, {"Content-Type": "application/json"}, 400, "JSON"),
    ],
)
def test_malformed_reviews_get_a_4xx_with_a_reason(server, body, headers, status, needle):
    url, session = server
    for path in ("/mutate-pods", "/mutate-bindings", "/validate-scale", "/validate-workloads"):
        answer = session.post(url + path, data=body, headers=headers, timeout=10)
        assert answer.status_code == status, answer.text
        assert needle in answer.json()["error"]
    good = reviews.pod_create(f.pod("after-bad", node_name="gpu-hyb-1"))
    assert post(server, "/mutate-pods", good)["allowed"] is True


def test_object_of_the_wrong_shape_is_a_400(server):
    body = reviews.pod_create(f.pod("shape"))
    body["request"]["object"]["metadata"]["annotations"] = {COST: 5}
    url, session = server
    answer = session.post(url + "/mutate-pods", json=body, timeout=10)
    assert answer.status_code == 400
    assert "request.object.metadata.annotations: must map names to strings" in (
        answer.json()["error"])


def test_oversized_body_is_refused(server):
    url, session = server
    body = b'{"x":"' + b"a" * (3 * 1024 * 1024 + 10) + b'"}'
    answer = session.post(url + "/mutate-pods", data=body,
                          headers={"Content-Type": "application/json"}, timeout=30)
    assert answer.status_code == 413
    assert "limit" in answer.json()["error"]


def test_unknown_path_and_wrong_method(server):
    url, session = server
    assert session.get(url + "/nope", timeout=5).status_code == 404
    answer = session.get(url + "/mutate-pods", timeout=5)
    assert answer.status_code == 405 and answer.json()["code"] == 405


def test_health_readiness_and_metrics(server):
    url, session = server
    assert session.get(url + "/healthz", timeout=5).json() == {"status": "ok"}
    ready = session.get(url + "/readyz", timeout=5)
    assert ready.status_code == 200 and ready.json()["ready"] is True
    post(server, "/validate-scale", reviews.scale("deployments", "llm-serve", 6, 3))
    text = session.get(url + "/metrics", timeout=5).text
    assert 'poolguard_admission_requests_total{endpoint="/validate-scale",result="denied"}' in text
    assert 'poolguard_scale_violations_total{enforcement="enforce",rule="protectedLast"}' in text
    assert "poolguard_admission_duration_seconds_bucket" in text
    assert "poolguard_cache_synced" in text


def _handshake(port: int, version: ssl.TLSVersion) -> str:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer old versions at all
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = version
        context.maximum_version = version
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        return tls.version()


def test_only_tls_1_2_or_newer(server):
    port = urlparse(server[0]).port
    assert _handshake(port, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
    assert _handshake(port, ssl.TLSVersion.TLSv1_3) == "TLSv1.3"
    with pytest.raises(ssl.SSLError):
        _handshake(port, ssl.TLSVersion.TLSv1_1)
