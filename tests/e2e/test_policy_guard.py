"""The policy ConfigMap edited to a poolLabel no node carries, on the real control plane:
`serve` keeps enforcing the last good policy, the reconciler rewrites no cost, and both
say why (a Warning Event on the ConfigMap, a metric). A real re-pooling (the hybrid
pool's cost changed) is held by the brake on mass rewrites until it is confirmed as
docs/reconciler.md says, then applied; so is the way back."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import wait_for
from tests.e2e.fake_kubelet import STRATEGIC, pod_status
from tests.e2e.harness import (
    COST_ANNOTATION,
    Environment,
    annotations,
    has_pool_cost,
    is_active,
)
from tests.e2e.workloads import apply, deployment, pod_template, wait_running, wait_settled
from webhook.core.consolidation.node_rank import node_tie_break
from webhook.core.objects.deletion_cost import MANAGED_COST_ANNOTATION, POOL_ANNOTATION
from webhook.core.policy.policy import Policy, parse_policy
from webhook.core.policy.pool_bands import SLOTS


@pytest.fixture(scope="module", autouse=True)
def enforce(env: Environment) -> Iterator[None]:
    env.set_policy(enforcement="enforce")
    yield


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
    env.write_policy(yaml.safe_dump(mistaken, sort_keys=False))
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
        env.write_policy(good)
        wait_for("serve to take the good policy back",
                 lambda: "policyRefused" not in json.loads(env.webhook_get("/readyz")[1]),
                 timeout=30)


# Whatever the number of costs earlier modules left to manage, re-costing this test's four
# pods is over the bound.
BRAKED = ("--max-rewrite-percent", "1")


def generation(text: str) -> str:
    """What `sha256sum policy.yaml` prints first, as the held message names it."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def ranked_under(policy: Policy, pod: dict[str, Any]) -> bool:
    """Does a pod whose consolidating pool's cost poolguard manages carry a rank of
    `policy`'s band: inside it, at its node's place in a slot (node_rank)? Other pods:
    True."""
    cost = annotations(pod).get(MANAGED_COST_ANNOTATION)
    pool = policy.pool_by_name(annotations(pod).get(POOL_ANNOTATION))
    if (pool is None or not pool.consolidates or cost is None or not is_active(pod)
            or annotations(pod).get(COST_ANNOTATION) != cost):
        return True
    spacing = pool.band.width // SLOTS
    return (pool.band.low <= int(cost) <= pool.band.high and (int(cost) - pool.band.low)
            % spacing == node_tie_break(pod["spec"]["nodeName"], spacing))


def mounted_generation(env: Environment) -> str:
    """The generation as docs/reconciler.md computes it: the ConfigMap's policy.yaml
    through sha256sum."""
    mounted = env.kubectl("-n", "poolguard", "get", "configmap", "poolguard-policy", "-o",
                          "jsonpath={.data.policy\\.yaml}", check=True).stdout
    return generation(mounted)


def confirm(env: Environment, text: str, args: Sequence[str]) -> None:
    """Confirm `text`'s rewrites as docs/reconciler.md says: the reconciler restarted
    with `--accept-rewrites GENERATION`; then wait until every managed rank is
    re-costed."""
    assert mounted_generation(env) == generation(text)
    env.stop_reconciler()
    env.start_reconciler(extra_args=(*args, "--accept-rewrites", generation(text)))
    policy = parse_policy(yaml.safe_load(text))
    wait_for("every managed rank re-costed", lambda: all(
        ranked_under(policy, p) for p in env.api_get("/api/v1/pods")["items"]), timeout=60)


def test_a_real_re_pooling_is_held_until_confirmed_then_applied(env: Environment) -> None:
    good = env.policy_file.read_text()
    shipped = parse_policy(yaml.safe_load(good))
    was_running = env.reconciler is not None and env.reconciler.alive()
    env.stop_reconciler()
    try:
        env.start_reconciler(extra_args=BRAKED)
        ns = env.new_namespace("repool")
        apply(env, ns, deployment("llm", 4, pod_template("llm", pools=["hybrid"])))
        wait_running(env, ns, "app=llm", 4)
        wait_for("the hybrid ranks", lambda: all(
            has_pool_cost(p, "hybrid") and ranked_under(shipped, p)
            for p in env.pods(ns, "app=llm")))
        before = costs(env, ns)
        repooled = yaml.safe_load(good)
        hybrid = next(p for p in repooled["pools"] if p["name"] == "hybrid")
        hybrid["deletionCost"] -= 100  # the whole band moves down
        text = yaml.safe_dump(repooled, sort_keys=False)
        env.write_policy(text)
        held = wait_for("the RewritesHeld Event", lambda: next(
            (e for e in policy_events(env) if e["reason"] == "RewritesHeld"
             and generation(text) in e["message"]), None), timeout=30)
        assert held["type"] == "Warning"
        assert f"confirm with --accept-rewrites {generation(text)}" in held["message"]
        assert costs(env, ns) == before  # held: not one of them rewritten
        confirm(env, text, BRAKED)
        assert not any(ranked_under(shipped, p) for p in env.pods(ns, "app=llm"))
    finally:
        # The way back is a re-pooling too: confirmed the same way, so the next modules
        # find the shipped costs.
        env.stop_reconciler()
        env.write_policy(good)
        confirm(env, good, BRAKED)
        env.stop_reconciler()
        if was_running:
            env.start_reconciler()
