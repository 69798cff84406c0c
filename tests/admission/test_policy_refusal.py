"""`serve` refuses a policy change that would leave the protected pool without nodes, and
reports a policy in force that protects no node (degraded), as a user runs it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support import reviews
from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.serving import running_server
from webhook.cluster.state import EXAMPLE_STATE

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_POLICY = (ROOT / "examples" / "policy.yaml").read_text()
MISSPELT = EXAMPLE_POLICY.replace("name: inference", "name: inferense", 1)
NO_SUCH_LABEL = EXAMPLE_POLICY.replace("poolLabel: node.usage ", "poolLabel: node.pool  ", 1)
UNSAFE_SCALE = reviews.scale("deployments", "llm-serve", 6, 3)  # removes an inference pod


def wait_for(check, timeout: float = 30.0):
    """The first true value of `check()`, or its last value after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def metric(session: requests.Session, url: str, name: str) -> float | None:
    text = session.get(url + "/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    return None


def session_for(ca: Path) -> requests.Session:
    session = requests.Session()
    session.verify, session.trust_env = str(ca), False
    return session


@pytest.mark.parametrize("mistake", [MISSPELT, NO_SUCH_LABEL], ids=["pool-name", "pool-label"])
def test_a_change_that_empties_the_protected_pool_is_refused(tmp_path, mistake):
    policy = tmp_path / "policy.yaml"
    policy.write_text(EXAMPLE_POLICY)
    with running_server(tmp_path, "--state", str(EXAMPLE_STATE), "--policy", str(policy),
                        workers=1) as (url, ca, _):
        session = session_for(ca)
        policy.write_text(mistake)
        ready = wait_for(lambda: session.get(url + "/readyz", timeout=5).json().get(
            "policyRefused"))
        assert ready and ready.startswith(f"policy file {policy}: ")
        assert ("protected pool 'inferense' has no node" in ready if mistake is MISSPELT
                else "no node carries the pool label node.pool" in ready)
        details = session.get(url + "/readyz", timeout=5)
        assert details.status_code == 200  # it serves: the last good policy is in force
        assert details.json()["policy"] == "ok" and details.json()["policyNodes"] == "ok"
        answer = session.post(url + "/validate-scale", json=UNSAFE_SCALE, timeout=10).json()
        assert answer["response"]["allowed"] is False  # still protecting the inference pods
        assert metric(session, url, "poolguard_policy_rejected_total") == 1.0
        assert metric(session, url, "poolguard_policy_degraded") == 0.0
        # a change the nodes bear out is taken again
        document = yaml.safe_load(EXAMPLE_POLICY)
        document["scaleDown"]["enforcement"] = "warn"
        policy.write_text(yaml.safe_dump(document))
        assert wait_for(lambda: "policyRefused" not in session.get(url + "/readyz",
                                                                   timeout=5).json())
        answer = session.post(url + "/validate-scale", json=UNSAFE_SCALE, timeout=10).json()
        assert answer["response"]["allowed"] is True and answer["response"]["warnings"]
    assert "policy reload refused, keeping the last good policy" in (
        (tmp_path / "server.log").read_text())


def test_a_policy_that_protects_no_node_at_start_serves_degraded(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(NO_SUCH_LABEL)
    with running_server(tmp_path, "--state", str(EXAMPLE_STATE), "--policy", str(policy),
                        workers=1) as (url, ca, _):
        session = session_for(ca)
        readyz = session.get(url + "/readyz", timeout=5)
        assert readyz.status_code == 200  # fail-open: it serves
        assert readyz.json()["policyNodes"].startswith("no node carries the pool label "
                                                       "node.pool")
        assert wait_for(lambda: metric(session, url, "poolguard_policy_degraded") == 1.0)
    assert "degraded: the policy in force protects no node" in (
        (tmp_path / "server.log").read_text())


def test_a_refused_change_is_an_event_on_the_policy_configmap(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(EXAMPLE_POLICY)
    with FakeKubeAPI() as api:
        api.put(*yaml.safe_load(EXAMPLE_STATE.read_text())["items"])
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        with running_server(tmp_path, "--kubeconfig", str(kubeconfig), "--policy", str(policy),
                            "--policy-configmap", "poolguard/poolguard-policy",
                            workers=1) as (url, ca, _):
            session = session_for(ca)
            assert wait_for(lambda: session.get(url + "/readyz", timeout=5).status_code == 200)
            policy.write_text(MISSPELT)
            events = wait_for(lambda: api.objects("Event"))
        assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"],
                 e["reason"]) for e in events] == [
            ("ConfigMap", "poolguard-policy", "Warning", "PolicyRefused")]
        assert "protected pool 'inferense' has no node" in events[0]["message"]
