"""The fast path and the Flask app give the same answer to every admission request.

`serve` runs the Flask app behind `with_fast_admission`, a thin WSGI layer that answers
the four admission POSTs itself through the same `Endpoint` the Flask views call; all
else goes to Flask. In-process, the same requests (good reviews, bad ones, hostile
variants) go to both, which must agree on the status line, the headers and the body
byte for byte. Over HTTPS, the server `make run` starts must count the requests its fast
path answered in /metrics.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.test import Client, TestResponse

from tests.support import factories as f
from tests.support import reviews
from tests.support.reviews import field_paths, replaced
from tests.support.serving import request, served_like_make_run
from webhook.admission.app import create_app, with_fast_admission
from webhook.admission.certwatcher import CLIENT_CERT_KEY
from webhook.admission.runtime import PolicyHolder, Runtime
from webhook.cluster.state import EXAMPLE_STATE, load_state

COST = "controller.kubernetes.io/pod-deletion-cost"
JSON = "application/json"


def good_reviews() -> list[tuple[str, dict[str, Any]]]:
    deployment = f.deployment("llm-serve", replicas=6)
    fewer = copy.deepcopy(deployment)
    fewer["spec"]["replicas"] = 2
    return [
        ("/mutate-pods", reviews.pod_create(f.pod("p", node_name="gpu-hyb-1"))),
        ("/mutate-pods", reviews.pod_create(f.pod("pinned"))),
        ("/mutate-bindings", reviews.binding("gpu-probe-2abcd", "gpu-inf-1")),
        ("/validate-scale", reviews.scale("deployments", "llm-serve", 6, 3)),
        ("/validate-scale", reviews.scale("statefulsets", "kv-cache", 3, 1, via="hpa")),
        ("/validate-workloads", reviews.workload_update(deployment, fewer)),
        ("/validate-workloads", reviews.workload_create(deployment)),
    ]


class Both:
    """The Flask app and the same app behind the fast path, with a count of the requests
    Flask itself handled (its before_request hook runs for every request it sees)."""

    def __init__(self, require_client_cert: bool = False) -> None:
        self.app: Flask = create_app(Runtime(PolicyHolder(None), load_state(EXAMPLE_STATE)),
                                     require_client_cert=require_client_cert)
        self.flask_requests = 0

        @self.app.before_request
        def count() -> None:
            self.flask_requests += 1

        self.flask = Client(self.app)
        self.fast = Client(with_fast_admission(self.app))

    def post(self, path: str, body: bytes, content_type: str | None = JSON,
             **environ: Any) -> tuple[TestResponse, TestResponse]:
        """(Flask's answer, the fast path's answer); the fast one must not reach Flask."""
        headers = {"Content-Type": content_type} if content_type else {}
        by_flask = self.flask.post(path, data=body, headers=headers, environ_base=environ)
        before = self.flask_requests
        by_fast = self.fast.post(path, data=body, headers=headers, environ_base=environ)
        assert self.flask_requests == before, f"POST {path} went through Flask"
        return by_flask, by_fast


def assert_same(by_flask: TestResponse, by_fast: TestResponse) -> None:
    assert by_fast.status == by_flask.status  # the whole line, reason phrase included
    assert by_fast.headers.to_wsgi_list() == by_flask.headers.to_wsgi_list()
    assert by_fast.get_data() == by_flask.get_data()


@pytest.fixture(scope="module")
def both() -> Both:
    return Both()


def encode(document: Any) -> bytes:
    return json.dumps(document).encode()


@pytest.mark.parametrize(("path", "body"), good_reviews(),
                         ids=lambda value: value if isinstance(value, str) else "")
def test_good_reviews_get_the_same_answer(both, path, body):
    by_flask, by_fast = both.post(path, encode(body))
    assert by_flask.status_code == 200 and by_flask.get_json()["response"]["uid"]
    assert_same(by_flask, by_fast)


def _bad_cases() -> list[tuple[str, bytes, str | None, int]]:
    pod = reviews.pod_create(f.pod("p", node_name="gpu-hyb-1"))
    wrong_shape = copy.deepcopy(pod)
    wrong_shape["request"]["object"]["metadata"]["annotations"] = {COST: 5}
    bad_cost = reviews.pod_create(f.pod("p", annotations={COST: "1e3"}))
    object_list = copy.deepcopy(pod)
    object_list["request"]["object"] = []
    return [
        ("not JSON", b"{not json", JSON, 400),
        ("empty body", b"", JSON, 400),
        ("nested too deep", b"[" * 2000 + b"]" * 2000, JSON, 400),
        ("too many values", b"[" + b"0," * 200_001 + b"0]", JSON, 413),
        ("over 3 MiB", b'{"x":"' + b"a" * (3 * 1024 * 1024) + b'"}', JSON, 413),
        ("a list", b"[]", JSON, 400),
        ("old apiVersion", b'{"apiVersion":"admission.k8s.io/v1beta1","kind":'
                           b'"AdmissionReview","request":{}}', JSON, 400),
        ("no uid", b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",'
                   b'"request":{}}', JSON, 400),
        ("annotation not a string", encode(wrong_shape), JSON, 400),
        ("object a list", encode(object_list), JSON, 400),
        ("text/plain", encode(pod), "text/plain", 415),
        ("no content type", encode(pod), None, 415),
        ("json with charset", encode(pod), "application/json; charset=utf-8", 200),
        ("upper-case type", encode(pod), "Application/JSON", 200),
        ("invalid cost (denied)", encode(bad_cost), JSON, 200),
    ]


@pytest.mark.parametrize(("case", "body", "content_type", "status"), _bad_cases(),
                         ids=[case[0] for case in _bad_cases()])
def test_bad_requests_get_the_same_answer(both, case, body, content_type, status):
    for path in ("/mutate-pods", "/mutate-bindings", "/validate-scale", "/validate-workloads"):
        by_flask, by_fast = both.post(path, body, content_type)
        if path == "/mutate-pods":
            assert by_flask.status_code == status, (case, by_flask.get_data()[:200])
        assert by_flask.status_code < 500
        assert_same(by_flask, by_fast)


def test_client_certificate_check_is_the_same():
    guarded = Both(require_client_cert=True)
    body = encode(reviews.pod_create(f.pod("p", node_name="gpu-hyb-1")))
    by_flask, by_fast = guarded.post("/mutate-pods", body)
    assert by_flask.status_code == 403 and "client certificate" in by_flask.get_json()["error"]
    assert_same(by_flask, by_fast)
    by_flask, by_fast = guarded.post("/mutate-pods", body,
                                     **{CLIENT_CERT_KEY: {"subject": ((("CN", "api"),),)}})
    assert by_flask.status_code == 200
    assert_same(by_flask, by_fast)


def test_everything_else_goes_to_flask(both):
    fast = both.fast
    before = both.flask_requests
    assert fast.get("/healthz").get_json() == {"status": "ok"}
    wrong_method = fast.get("/mutate-pods")
    assert wrong_method.status_code == 405 and wrong_method.get_json()["code"] == 405
    assert fast.post("/mutate-pods/", data=b"{}", headers={"Content-Type": JSON}
                     ).status_code in (308, 404)
    assert fast.post("/nope", data=b"{}").status_code == 404
    assert both.flask_requests == before + 4


def test_a_bug_is_the_same_logged_500(monkeypatch, caplog):
    import webhook.admission.app as app_module

    def broken(request, ctx):
        return request["object"].no_such_method()

    monkeypatch.setitem(app_module.ENDPOINTS, "/mutate-pods", broken)
    body = encode(reviews.pod_create(f.pod("p", node_name="gpu-hyb-1")))
    by_flask, by_fast = Both().post("/mutate-pods", body)
    assert by_flask.status_code == 500
    assert by_flask.get_json() == {"error": "internal error; the server log has the details",
                                   "code": 500}
    assert_same(by_flask, by_fast)
    assert caplog.text.count("unexpected error answering /mutate-pods") == 2


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=50),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=8)
GOOD = good_reviews()
PATHS = [(index, path) for index, (_, body) in enumerate(GOOD) for path in field_paths(body)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(PATHS), value=JSON_VALUES)
def test_any_field_replaced_gets_the_same_answer(both, which, value):
    index, field = which
    endpoint, body = GOOD[index]
    by_flask, by_fast = both.post(endpoint, encode(replaced(body, field, value)))
    assert by_flask.status_code < 500
    assert_same(by_flask, by_fast)


# --- over HTTPS, as `make run` serves ----------------------------------------------------


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text, 0 when the sample is absent."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    pattern = re.escape(name + ("{" + wanted + "}" if labels else "")) + r" (\S+)"
    match = re.search("^" + pattern + "$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_metrics_count_the_fast_path_under_make_run(tmp_path):
    good = encode(reviews.pod_create(f.pod("counted", node_name="gpu-hyb-1")))
    with served_like_make_run(tmp_path) as server:
        for _ in range(7):
            status, headers, body = request(server, "POST", "/mutate-pods", good)
            assert status == 200 and json.loads(body)["response"]["patch"]
            assert headers["Content-Type"] == JSON and "Server" not in headers
            assert headers["Content-Length"] == str(len(body))
        status, _, body = request(server, "POST", "/mutate-pods", b"{not json")
        assert status == 400 and b"not valid JSON" in body
        status, _, body = request(server, "GET", "/metrics")
        assert status == 200
    text = body.decode()
    pods = {"endpoint": "/mutate-pods"}
    assert metric(text, "poolguard_admission_requests_total", **pods, result="patched") == 7
    assert metric(text, "poolguard_admission_requests_total", **pods,
                  result="bad-request") == 1
    assert metric(text, "poolguard_admission_decisions_total", **pods, outcome="set") == 7
    assert metric(text, "poolguard_admission_duration_seconds_count", **pods) == 8
    assert metric(text, "poolguard_admission_duration_seconds_bucket", **pods, le="+Inf") == 8
