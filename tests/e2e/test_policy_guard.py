"""The policy ConfigMap edited to a poolLabel no node carries, on the real control plane:
`serve` keeps enforcing the last good policy, the reconciler rewrites no cost, and both
say why (a Warning Event on the ConfigMap, a metric)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import wait_for
from tests.e2e.fake_kubelet import STRATEGIC, pod_status
from tests.e2e.harness import COST_ANNOTATION, Environment, annotations, has_pool_cost
from tests.e2e.workloads import apply, deployment, pod_template, wait_running, wait_settled


@pytest.fixture(scope="module", autouse=True)
def enforce(env: Environment) -> Iterator[None]:
    env.set_policy(enforcement="enforce")
    yield


def write_policy(env: Environment, text: str) -> None:
    """The ConfigMap changed, and the file the kubelet would sync from it."""
    env.kubectl("-n", "poolguard", "patch", "configmap", "poolguard-policy", "--type=merge",
                "-p", json.dumps({"data": {"policy.yaml": text}}), check=True)
    env.policy_file.write_text(text)


def policy_events(env: Environment) -> list[dict[str, Any]]:
    listed = env.api_get("/api/v1/namespaces/poolguard/events")["items"]
    return [e for e in listed if e["involvedObject"]["kind"] == "ConfigMap"
            and e["involvedObject"]["name"] == "poolguard-policy"]


def costs(env: Environment, ns: str) -> dict[str, str | None]:
    return {p["metadata"]["name"]: annotations(p).get(COST_ANNOTATION)
            for p in env.pods(ns, "app=llm")}


def test_a_policy_naming_no_node_is_refused_and_the_last_good_one_enforced(
        env: Environment) -> None:
    env.start_reconciler()
    ns = env.new_namespace("policy-typo")
    apply(env, ns, deployment("llm", 4, pod_template("llm", pools=["inference", "hybrid"],
                                                     spread_pools=True)))
    pods = wait_running(env, ns, "app=llm", 4)
    pool = env.node_pool()
    wait_for("the pool costs", lambda: all(
        has_pool_cost(p, pool[p["spec"]["nodeName"]]) for p in env.pods(ns, "app=llm")))
    # An unready inference pod is the first the ReplicaSet controller deletes: scaling to
    # 3 removes it while hybrid pods survive (protectedLast).
    unready = next(p for p in pods if pool[p["spec"]["nodeName"]] == "inference")
    env.core.patch_namespaced_pod_status(
        unready["metadata"]["name"], ns, {"status": pod_status(unready, ready=False)},
        _content_type=STRATEGIC)
    wait_settled(env, ns)
    before = costs(env, ns)
    good = env.policy_file.read_text()
    mistaken = yaml.safe_load(good)
    mistaken["poolLabel"] = "node.pool"
    write_policy(env, yaml.safe_dump(mistaken, sort_keys=False))
    try:
        def refused() -> str | None:
            return json.loads(env.webhook_get("/readyz")[1]).get("policyRefused")

        reason = wait_for("serve to refuse the policy", refused, timeout=30)
        assert "no node carries the pool label node.pool" in reason
        assert "node.usage" in reason  # the label the nodes do carry
        result = env.kubectl("-n", ns, "scale", "deployment/llm", "--replicas=3")
        assert result.code != 0, str(result)
        assert 'admission webhook "scale.poolguard.dev" denied the request' in result.stderr
        assert unready["metadata"]["name"] in result.stderr
        metrics = env.webhook_get("/metrics")[1]
        assert "poolguard_policy_rejected_total 1.0" in metrics
        events = wait_for("both refusals as Events", lambda: (
            found if len(found := policy_events(env)) >= 2 else None), timeout=30)
        assert {(e["type"], e["reason"], e["source"]["component"]) for e in events} == {
            ("Warning", "PolicyRefused", "poolguard-webhook"),
            ("Warning", "PolicyRefused", "poolguard-reconciler")}
        assert costs(env, ns) == before  # the reconciler rewrote no cost
    finally:
        write_policy(env, good)
        wait_for("serve to take the good policy back",
                 lambda: "policyRefused" not in json.loads(env.webhook_get("/readyz")[1]),
                 timeout=30)
