"""`serve` against a live API (the fake server): caches, readiness, staleness, faults."""

from __future__ import annotations

import base64
import json
import time

import pytest
import requests
import yaml

from tests.support import factories as f
from tests.support import reviews
from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.serving import running_server
from webhook.cluster.state import EXAMPLE_STATE
from webhook.core.objects.deletion_cost import (
    DELETION_COST_ANNOTATION as COST,
)
from webhook.core.objects.deletion_cost import (
    MANAGED_COST_ANNOTATION as MANAGED,
)
from webhook.core.objects.deletion_cost import (
    POOL_ANNOTATION as POOL,
)

STATE = yaml.safe_load(EXAMPLE_STATE.read_text())["items"]


def wait_for(check, timeout: float = 15.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


@pytest.fixture
def api():
    with FakeKubeAPI() as server:
        server.put(*STATE)
        yield server


def session_for(ca) -> requests.Session:
    session = requests.Session()
    session.verify, session.trust_env = str(ca), False
    return session


def test_live_mode_serves_from_watched_caches(tmp_path, api):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    with running_server(tmp_path, "--kubeconfig", str(kubeconfig), workers=1) as (url, ca, _):
        session = session_for(ca)
        assert wait_for(lambda: session.get(url + "/readyz", timeout=5).status_code == 200)
        details = session.get(url + "/readyz", timeout=5).json()
        assert details["resources"]["synced"] is True
        answer = session.post(url + "/validate-scale", timeout=10,
                              json=reviews.scale("deployments", "llm-serve", 6, 3)).json()
        assert answer["response"]["allowed"] is False  # same verdict as from the state file
        # a node added after start is known to the pod webhook without a restart
        api.put(f.node("gpu-inf-9", "inference"))
        pod = f.pod("late", node_name="gpu-inf-9")

        def patched() -> bool:
            response = session.post(url + "/mutate-pods", json=reviews.pod_create(pod),
                                    timeout=5).json()["response"]
            return "patch" in response

        assert wait_for(patched)
        reads_before = len(api.requests)
        for _ in range(20):
            session.post(url + "/mutate-pods", json=reviews.pod_create(pod), timeout=5)
            session.post(url + "/validate-scale", timeout=10,
                         json=reviews.scale("deployments", "llm-serve", 6, 4))
        new = [r for r in api.requests[reads_before:] if "watch" not in r.query]
        assert new == []  # no API call per admission request


def test_api_down_makes_scale_checks_fail_open_then_recover(tmp_path, api):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    with running_server(tmp_path, "--kubeconfig", str(kubeconfig), "--max-staleness", "2",
                        workers=1) as (url, ca, _):
        session = session_for(ca)
        assert wait_for(lambda: session.get(url + "/readyz", timeout=5).status_code == 200)
        api.stop()
        assert wait_for(lambda: session.get(url + "/readyz", timeout=5).status_code == 503)
        started = time.monotonic()
        answer = session.post(url + "/validate-scale", timeout=10,
                              json=reviews.scale("deployments", "llm-serve", 6, 3)).json()
        assert time.monotonic() - started < 2.0  # answered at once, never waiting on the API
        response = answer["response"]
        assert response["allowed"] is True
        assert "could not check this scale-down" in response["warnings"][0]
        assert "staleness bound" in response["warnings"][0]
        api.start()
        assert wait_for(lambda: session.get(url + "/readyz", timeout=5).status_code == 200,
                        timeout=40)
        answer = session.post(url + "/validate-scale", timeout=10,
                              json=reviews.scale("deployments", "llm-serve", 6, 3)).json()
        assert answer["response"]["allowed"] is False


def test_fail_closed_denies_unchecked_scale_downs(tmp_path, api):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    api.fail(503)  # the API answers nothing useful from the start: the cache never syncs
    with running_server(tmp_path, "--kubeconfig", str(kubeconfig), "--fail-closed",
                        workers=1) as (url, ca, _):
        session = session_for(ca)
        ready = session.get(url + "/readyz", timeout=5)
        assert ready.status_code == 503 and ready.json()["cache"] == (
            "the cluster cache has not synced yet")
        response = session.post(url + "/validate-scale", timeout=10, json=reviews.scale(
            "deployments", "llm-serve", 6, 3)).json()["response"]
        assert response["allowed"] is False and response["status"]["code"] == 503
        # pod mutation never depends on freshness: an unknown node just means no patch
        pod_answer = session.post(url + "/mutate-pods", timeout=5, json=reviews.pod_create(
            f.pod("p", node_name="gpu-inf-1"))).json()["response"]
        assert pod_answer["allowed"] is True


def test_binding_that_outruns_the_pod_watch_event_still_gets_its_cost(tmp_path, api):
    """The scheduler binds a pod our watch has not delivered yet (a busy worker during a
    burst): the pod is read from the API server at once, and a cost someone else set on
    it is still kept."""
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    with running_server(tmp_path, "--kubeconfig", str(kubeconfig), workers=1) as (url, ca, _):
        session = session_for(ca)
        assert wait_for(lambda: session.get(url + "/readyz", timeout=5).status_code == 200)
        # The pod watch reconnects only after 20 s: the pods below reach the API, not us.
        api.slow(20.0, count=1, method="GET", path_contains="/api/v1/pods")
        api.drop_watches()
        api.put(f.pod("just-created", node_name=None),
                f.pod("hand-costed", node_name=None, cost="7"))

        def unchanged(response: dict) -> bool:
            return response["allowed"] is True and "patch" not in response

        def bind(name: str) -> dict:
            return session.post(url + "/mutate-bindings", timeout=5, json=reviews.binding(
                name, "gpu-hyb-1")).json()["response"]

        answer = bind("just-created")
        [op] = json.loads(base64.b64decode(answer["patch"]))
        cost = op["value"][COST]  # the hybrid pool consolidates: a node rank in its band
        assert op == {"op": "add", "path": "/metadata/annotations",
                      "value": {COST: cost, MANAGED: cost, POOL: "hybrid"}}
        assert int(cost) < -100
        assert unchanged(bind("hand-costed"))  # a cost someone else set is kept
        assert unchanged(bind("never-created"))
        reads = [r for r in api.requests if r.path == "/api/v1/namespaces/ml/pods"]
        assert [r.query["fieldSelector"] for r in reads] == [
            "metadata.name=just-created", "metadata.name=hand-costed",
            "metadata.name=never-created"]  # one read each, for pods not in the cache
        api.fail(503, path_contains="/api/v1/namespaces/ml/pods")
        assert unchanged(bind("just-created"))  # left to the
        api.clear_faults()  # reconciler when the API cannot say
