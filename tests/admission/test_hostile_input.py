"""Malformed, truncated, wrong-typed and hostile AdmissionReviews never produce a 5xx.

Properties run in-process against the Flask app (thousands of cases); a corpus runs over
real HTTPS against `serve`, which must keep answering correctly afterwards.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import factories as f
from tests.support import reviews
from tests.support.reviews import field_paths, replaced
from tests.support.serving import running_server
from webhook.admission.app import create_app
from webhook.admission.runtime import PolicyHolder, Runtime
from webhook.cluster.state import EXAMPLE_STATE, load_state

ENDPOINTS = ["/mutate-pods", "/mutate-bindings", "/validate-scale", "/validate-workloads"]
COST = "controller.kubernetes.io/pod-deletion-cost"


def good_reviews() -> list[dict[str, Any]]:
    deployment = f.deployment("llm-serve", replicas=6)
    fewer = copy.deepcopy(deployment)
    fewer["spec"]["replicas"] = 2
    return [
        reviews.pod_create(f.pod("p", node_name="gpu-hyb-1")),
        reviews.binding("gpu-probe-2abcd", "gpu-inf-1"),
        reviews.scale("deployments", "llm-serve", 6, 3),
        reviews.scale("statefulsets", "kv-cache", 3, 1, via="hpa"),
        reviews.workload_update(deployment, fewer),
        reviews.workload_create(deployment),
    ]


def check_answer(status: int, content_type: str, body: bytes, sent: Any) -> None:
    """Either a JSON 4xx naming the problem or a well-formed AdmissionReview response."""
    assert status < 500, body[:300]
    assert content_type.startswith("application/json")
    document = json.loads(body)
    if status != 200:
        assert 400 <= status < 500 and isinstance(document["error"], str) and document["error"]
        return
    assert document["apiVersion"] == "admission.k8s.io/v1"
    assert document["kind"] == "AdmissionReview"
    response = document["response"]
    assert response["uid"] == sent["request"]["uid"]
    assert isinstance(response["allowed"], bool)
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        ops = json.loads(base64.b64decode(response["patch"]))
        assert all(op["op"] == "add" and op["path"].startswith("/metadata") for op in ops)
    for warning in response.get("warnings", []):
        assert "\n" not in warning and len(warning) <= 256
    if not response["allowed"]:
        assert 400 <= response["status"]["code"] < 600 and response["status"]["message"]


@pytest.fixture(scope="module")
def client():
    app = create_app(Runtime(PolicyHolder(None), load_state(EXAMPLE_STATE)))
    return app.test_client()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                 max_size=4),
    max_leaves=12,
)
hostile_strings = st.sampled_from([
    "", "+10", "0" * 5000, "9" * 100000, "-", "\u0663", "\uff11", "1\n2", "\x00", "\u202e1",
    "😀" * 100, "a" * 70000, " 1", "1 ", "-2147483649", "2147483647",
])


@st.composite
def mutated_reviews(draw) -> Any:
    base = draw(st.sampled_from(good_reviews()))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(field_paths(base))))
        base = replaced(base, path, draw(json_values | hostile_strings))
    return base


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=mutated_reviews(), endpoint=st.sampled_from(ENDPOINTS))
def test_mutated_reviews_get_a_clean_answer(client, body, endpoint):
    answer = client.post(endpoint, data=json.dumps(body), content_type="application/json")
    uid_ok = isinstance(body, dict) and isinstance(body.get("request"), dict) and isinstance(
        body["request"].get("uid"), str)
    check_answer(answer.status_code, answer.content_type, answer.data,
                 body if uid_ok else {"request": {"uid": None}})


@settings(max_examples=150, deadline=None)
@given(raw=st.binary(max_size=400) | st.text(max_size=400).map(str.encode),
       endpoint=st.sampled_from(ENDPOINTS),
       content_type=st.sampled_from(["application/json", "text/plain", "application/yaml",
                                     "application/json; charset=utf-8", ""]))
def test_arbitrary_bytes_get_a_4xx(client, raw, endpoint, content_type):
    answer = client.post(endpoint, data=raw, content_type=content_type)
    if answer.status_code == 200:  # the bytes happened to be a usable review
        return
    check_answer(answer.status_code, answer.content_type, answer.data, None)


@settings(max_examples=100, deadline=None)
@given(value=hostile_strings | st.text(max_size=50), key=st.sampled_from([COST, "x/y~z", ""]))
def test_hostile_annotation_values(client, value, key):
    pod = f.pod("p", node_name="gpu-hyb-1", annotations={key: value})
    body = reviews.pod_create(pod)
    answer = client.post("/mutate-pods", data=json.dumps(body), content_type="application/json")
    check_answer(answer.status_code, answer.content_type, answer.data, body)
    if key == COST and answer.status_code == 200:
        response = answer.get_json()["response"]
        from webhook.core.objects.deletion_cost import is_valid_deletion_cost
        assert response["allowed"] is is_valid_deletion_cost(value)


def test_deeply_nested_old_object_is_a_4xx(client):
    deployment = f.deployment("not-cached", replicas=3)
    fewer = copy.deepcopy(deployment)
    fewer["spec"]["replicas"] = 1
    nested: dict = {}
    for _ in range(900):
        nested = {"x": nested}
    deployment["spec"]["template"]["spec"] = nested
    body = reviews.workload_update(deployment, fewer)
    answer = client.post("/validate-scale", data=json.dumps(body),
                         content_type="application/json")
    check_answer(answer.status_code, answer.content_type, answer.data, body)


def corpus() -> list[tuple[str, bytes, str]]:
    review = reviews.pod_create(f.pod("p", node_name="gpu-hyb-1"))
    text = json.dumps(review).encode()
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    items = [
        ("truncated", text[: len(text) // 2], "application/json"),
        ("empty", b"", "application/json"),
        ("null", b"null", "application/json"),
        ("deeply nested", deep, "application/json"),
        ("wrong content type", text, "application/x-www-form-urlencoded"),
        ("utf-16", json.dumps(review).encode("utf-16"), "application/json"),
        ("invalid utf-8", b'{"kind":"\xff\xfe"}', "application/json"),
        ("v1beta1", text.replace(b"admission.k8s.io/v1", b"admission.k8s.io/v1beta1"),
         "application/json"),
        ("huge annotation", json.dumps(reviews.pod_create(f.pod(
            "p", annotations={COST: "1" * 2_000_000}))).encode(), "application/json"),
        ("control characters", json.dumps(reviews.pod_create(f.pod(
            "p\u0000\u001b", annotations={"k\n": "\u0007"}))).encode(), "application/json"),
    ]
    return [(name, body, ctype) for name, body, ctype in items]


def test_corpus_over_https_then_a_good_request(tmp_path):
    with running_server(tmp_path, "--state", str(EXAMPLE_STATE), workers=1) as (url, ca, proc):
        session = requests.Session()
        session.verify, session.trust_env = str(ca), False
        for endpoint in ENDPOINTS:
            for name, body, content_type in corpus():
                answer = session.post(url + endpoint, data=body, timeout=30,
                                      headers={"Content-Type": content_type})
                assert answer.status_code < 500, (name, endpoint, answer.text[:200])
                assert answer.headers["Content-Type"].startswith("application/json"), name
        good = reviews.pod_create(f.pod("after", node_name="gpu-inf-1"))
        answer = session.post(url + "/mutate-pods", json=good, timeout=10)
        assert answer.status_code == 200 and answer.json()["response"]["patch"]
        assert proc.poll() is None
        assert "Worker exiting" not in (tmp_path / "server.log").read_text()


def test_a_bug_is_a_logged_500_not_a_4xx(monkeypatch, caplog):
    """Only explicit shape checks answer 4xx; a programming error is a 500 in the log."""
    import webhook.admission.app as app_module

    def broken(request, ctx):
        return request["object"].no_such_method()

    monkeypatch.setitem(app_module.ENDPOINTS, "/mutate-pods", broken)
    app = create_app(Runtime(PolicyHolder(None), load_state(EXAMPLE_STATE)))
    body = reviews.pod_create(f.pod("p", node_name="gpu-hyb-1"))
    answer = app.test_client().post("/mutate-pods", json=body)
    assert answer.status_code == 500
    # no internals in the body (no exception class): those are for the log
    assert answer.get_json() == {"error": "internal error; the server log has the details",
                                 "code": 500}
    assert "unexpected error answering /mutate-pods" in caplog.text


@pytest.mark.parametrize(("replicas", "says"), [
    (2**31, "2147483648 is more than the int32 maximum 2147483647"),
    (10**30, "must be an integer"),  # past 64 bits the JSON reader makes it a float
])
def test_a_scale_beyond_int32_is_a_4xx_naming_the_field(client, replicas, says):
    """The API server keeps replicas as an int32: a larger count is no review it sends."""
    body = reviews.scale("deployments", "llm-serve", 6, replicas)
    answer = client.post("/validate-scale", data=json.dumps(body),
                         content_type="application/json")
    assert answer.status_code == 400
    assert f"request.object.spec.replicas: {says}" in answer.get_data(as_text=True)
