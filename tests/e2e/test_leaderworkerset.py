"""LeaderWorkerSet scale-downs on the real LWS controller (tests/e2e/lws.py).

The LWS controller creates each group (the leader StatefulSet, then a worker StatefulSet per
leader pod), the driver places each pod on the pool the test chooses and the fake kubelet
starts it. A scale-down through `/scale` or through `spec.replicas` is then carried out by
the real controllers: LWS shrinks its leader StatefulSet, the StatefulSet controller deletes
the leaders, the garbage collector their worker StatefulSets and pods. The pods that really
go must be the ones `plan --workload lws/NS/NAME` predicted; an unsafe scale-down is denied
with the pods named; the LWS controller's own StatefulSet writes are never denied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pytest

from tests.e2e.controlplane import wait_for
from tests.e2e.harness import Environment
from tests.e2e.lws import (
    ACCOUNT,
    NAME_LABEL,
    LwsController,
    deleted_since,
    group_and_worker,
    leader_worker_set,
    lws_replicas,
    wait_groups,
)
from tests.e2e.workloads import active_pods, apply, compare, wait_settled
from tests.e2e.workloads import plan as plan_json

OWNER_DECIDED = re.compile(
    r'^poolguard_scale_owner_decided_total\{kind="StatefulSet",owner_kind="LeaderWorkerSet"\}'
    r" (\S+)$", re.M)


@pytest.fixture(scope="module", autouse=True)
def enforce(env: Environment) -> None:
    env.set_policy(enforcement="enforce")


def by_group(pools: Mapping[int, str]) -> Any:
    """A placement: every pod of group g on pools[g]."""
    return lambda pod: pools[group_and_worker(pod)[0]]


def owner_decided(env: Environment) -> float:
    status, text = env.webhook_get("/metrics")
    assert status == 200, text
    found = OWNER_DECIDED.search(text)
    return float(found.group(1)) if found else 0.0


def scale_down_as_predicted(env: Environment, ns: str, name: str, size: int, target: int,
                            how: str) -> dict[str, Any]:
    """Predict, scale (`how`: "scale" or "patch"), wait for the groups to go; check the
    deleted pods against the prediction. The plan document."""
    document = plan_json(env, f"lws/{ns}/{name}", target)
    assert document["allowed"] is True, json.dumps(document, indent=2)
    before = active_pods(env, ns)
    if how == "scale":
        done = env.kubectl("-n", ns, "scale", f"leaderworkerset/{name}", f"--replicas={target}")
    else:
        done = env.kubectl("-n", ns, "patch", "leaderworkerset", name, "--type=merge", "-p",
                           json.dumps({"spec": {"replicas": target}}))
    assert done.code == 0, str(done)
    wait_for(f"LWS {ns}/{name} down to {target} groups",
             lambda: len([p for p in active_pods(env, ns).values()
                          if p["metadata"]["labels"].get(NAME_LABEL) == name]) == target * size,
             timeout=120, interval=0.5)
    wait_settled(env, ns)
    deleted = deleted_since(before, active_pods(env, ns))
    verdict = compare(document, deleted)
    assert verdict.ok, f"{verdict.problems}\nplan: {json.dumps(document, indent=2)}"
    # whole groups, highest index first
    gone = {group_and_worker(before[p])[0] for p in deleted}
    assert gone == set(range(target, target + len(gone))), sorted(deleted)
    assert len(deleted) == len(gone) * size
    return document


def test_scale_down_removes_the_predicted_groups_and_the_controller_is_never_denied(
        env: Environment, lws_controller: LwsController) -> None:
    ns = env.new_namespace("lws-scale")
    # groups 0-1 on inference, 2-4 on hybrid: shrinking to 2 removes hybrid groups only
    apply(env, ns, leader_worker_set("llm", 5, 3))
    wait_groups(env, ns, "llm", 5, 3, by_group({0: "inference", 1: "inference", 2: "hybrid",
                                                3: "hybrid", 4: "hybrid"}))
    writes = owner_decided(env)
    scale_down_as_predicted(env, ns, "llm", 3, 3, "scale")  # through /scale
    assert lws_replicas(env, ns, "llm") == 3
    scale_down_as_predicted(env, ns, "llm", 3, 2, "patch")  # through spec.replicas
    assert lws_replicas(env, ns, "llm") == 2
    # The LWS controller shrank its leader StatefulSet twice; poolguard let it (judged at
    # the LWS) and counted it as an owner's write.
    assert owner_decided(env) >= writes + 2
    user = f"system:serviceaccount:{ACCOUNT[0]}:{ACCOUNT[1]}"
    denied = [e for e in env.audit_events()
              if e.get("user", {}).get("username") == user
              and (e.get("objectRef") or {}).get("resource") == "statefulsets"
              and (e.get("responseStatus") or {}).get("code", 200) in (400, 403, 422)]
    assert not denied, denied
    leaders = env.apps.read_namespaced_stateful_set("llm", ns)
    assert leaders.spec.replicas == 2 and leaders.status.replicas == 2


@pytest.mark.parametrize("how", ["scale", "patch"])
def test_unsafe_scale_down_is_denied_with_the_pods_named(
        env: Environment, lws_controller: LwsController, how: str) -> None:
    ns = env.new_namespace(f"lws-unsafe-{how}")
    # group 0 on hybrid; group 1 on inference; group 2's leader on inference and its
    # worker on hybrid: removing group 2 takes an inference pod while hybrid pods stay
    pools = {(0, 0): "hybrid", (0, 1): "hybrid", (1, 0): "inference", (1, 1): "inference",
             (2, 0): "inference", (2, 1): "hybrid"}
    apply(env, ns, leader_worker_set("llm", 3, 2))
    wait_groups(env, ns, "llm", 3, 2, lambda pod: pools[group_and_worker(pod)])
    document = plan_json(env, f"lws/{ns}/llm", 2)
    assert document["allowed"] is False, json.dumps(document, indent=2)
    assert {v["name"] for v in document["victims"]} == {"llm-2", "llm-2-1"}
    before = active_pods(env, ns)
    if how == "scale":
        done = env.kubectl("-n", ns, "scale", "leaderworkerset/llm", "--replicas=2")
    else:
        done = env.kubectl("-n", ns, "patch", "leaderworkerset", "llm", "--type=merge", "-p",
                           '{"spec":{"replicas":2}}')
    assert done.code != 0, str(done)
    # both routes reach the scale webhook (its rules hold leaderworkersets and their /scale)
    assert 'admission webhook "scale.poolguard.dev" denied the request' in done.stderr, \
        done.stderr
    assert f"LeaderWorkerSet {ns}/llm from 3 to 2" in done.stderr, done.stderr
    assert "protected-pool pod llm-2 (node inference-" in done.stderr, done.stderr
    assert "llm-0 (node hybrid-" in done.stderr, done.stderr
    assert lws_replicas(env, ns, "llm") == 3
    wait_settled(env, ns)
    assert not deleted_since(before, active_pods(env, ns))
