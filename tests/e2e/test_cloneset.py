"""OpenKruise CloneSet scale-downs against the real CloneSet controller (tests/e2e/kruise.py).

The controller creates the pods; the test is their scheduler (through `pods/binding`, so
poolguard's binding webhook gives each pod the cost of its node's pool) and their kubelet.
A scale-down through `clonesets/scale` and one through a `spec.replicas` patch (with an old
revision kept by a partition, and a pod named in `scaleStrategy.podsToDelete`) delete exactly
the pods `plan` names, run on the cluster just before the scale; a scale-down `plan` denies
is denied by the webhook, by either route, and deletes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import pytest

from tests.e2e.controlplane import wait_for
from tests.e2e.fake_kubelet import STRATEGIC, pod_status
from tests.e2e.harness import Environment, node_names
from tests.e2e.kruise import (
    CloneSetController,
    cloneset,
    drive,
    predicted,
    read_cloneset,
    settle_after_scale,
    wait_webhook_reads_clonesets,
)
from tests.e2e.lws import deleted_since
from tests.e2e.workloads import active_pods, apply, bind


@pytest.fixture(scope="module", autouse=True)
def warn(env: Environment) -> None:
    """These scenarios judge the prediction, not the verdict (one test enforces)."""
    env.set_policy(enforcement="warn")


def placer(env: Environment, namespace: str, pools: list[str],
           unready: frozenset[int] = frozenset()) -> Any:
    """Bind the i-th new pod to a node of pools[i % len(pools)], Running and Ready unless i
    is in `unready` (ready times a minute apart, so the order below the cost is plain)."""
    counter = {"n": 0}

    def place(pod: Mapping[str, Any]) -> None:
        index = counter["n"]
        counter["n"] += 1
        pool = pools[index % len(pools)]
        nodes = node_names(pool)
        name = pod["metadata"]["name"]
        bind(env, namespace, name, nodes[index % len(nodes)])
        bound = env.api_get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        since = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10 + index)
        env.core.patch_namespaced_pod_status(
            name, namespace, {"status": pod_status(bound, ready=index not in unready,
                                                   ready_since=since)},
            _content_type=STRATEGIC)
    return place


def pools_of(env: Environment, pods: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    pool = env.node_pool()
    return {name: pool.get(p["spec"].get("nodeName") or "", "") for name, p in pods.items()}


def test_scale_subresource_deletes_the_predicted_hybrid_pods(
        env: Environment, cloneset_controller: CloneSetController) -> None:
    ns = env.new_namespace("cloneset-scale")
    apply(env, ns, cloneset("llm", 6))
    drive(env, ns, "llm", placer(env, ns, ["inference", "hybrid"]), set())
    before = active_pods(env, ns)
    document, done = predicted(env, ns, "llm", 3, lambda: env.kubectl(
        "-n", ns, "scale", "clonesets.apps.kruise.io/llm", "--replicas=3"))
    assert done.code == 0, str(done)
    settle_after_scale(env, ns, "llm")
    deleted = deleted_since(before, active_pods(env, ns))
    assert deleted == {v["name"] for v in document["victims"]}
    assert all(v["certain"] for v in document["victims"])
    # the deletion cost is honoured: the three hybrid pods (cost -100) go
    assert set(pools_of(env, {n: before[n] for n in deleted}).values()) == {"hybrid"}


def test_replicas_patch_takes_named_then_old_revision_pods_first(
        env: Environment, cloneset_controller: CloneSetController) -> None:
    """Six pods, four of a second revision; a patch of spec.replicas to 3 that also names a
    pod to delete and lowers the partition to 0: the named pod goes, then the two pods of
    the old revision, whatever their cost."""
    ns = env.new_namespace("cloneset-patch")
    placed: set[str] = set()
    place = placer(env, ns, ["inference", "inference", "hybrid"])
    apply(env, ns, cloneset("llm", 6, max_unavailable="100%"))
    drive(env, ns, "llm", place, placed)
    apply(env, ns, cloneset("llm", 6, revision=2, partition=2, max_unavailable="100%"))
    drive(env, ns, "llm", place, placed, updated=4)
    before = active_pods(env, ns)
    current = read_cloneset(env, ns, "llm")
    new_revision = current["status"]["updateRevision"]
    old = {n for n, p in before.items()
           if p["metadata"]["labels"]["controller-revision-hash"] != new_revision}
    named = sorted(set(before) - old)[0]
    change = {"replicas": 3, "scaleStrategy": {"podsToDelete": [named]},
              "updateStrategy": {**current["spec"]["updateStrategy"], "partition": 0}}
    document, done = predicted(env, ns, "llm", 3, lambda: env.kubectl(
        "-n", ns, "patch", "clonesets.apps.kruise.io", "llm", "--type=merge",
        "-p", json.dumps({"spec": change})), change)
    assert done.code == 0, str(done)
    settle_after_scale(env, ns, "llm")
    deleted = deleted_since(before, active_pods(env, ns))
    assert deleted == {v["name"] for v in document["victims"]}
    assert len(old) == 2 and deleted == old | {named}


@pytest.mark.parametrize("how", ["scale", "patch"])
def test_an_unsafe_scale_down_is_denied_as_plan_says(
        env: Environment, cloneset_controller: CloneSetController, how: str) -> None:
    """An inference pod that is not ready goes before the hybrid ones (availability comes
    before the cost): `plan` denies 3 -> 2, and so does the webhook, through
    `clonesets/scale` and through a `spec.replicas` patch; nothing is deleted."""
    ns = env.new_namespace(f"cloneset-unsafe-{how}")
    apply(env, ns, cloneset("llm", 3))
    place, placed = placer(env, ns, ["inference", "hybrid"], frozenset({0})), set()

    def all_bound() -> bool:  # the scenario needs every pod on its pool
        drive(env, ns, "llm", place, placed)
        return all(p["spec"].get("nodeName") for p in active_pods(env, ns).values())

    wait_for(f"every pod of {ns}/llm bound", all_bound, timeout=120)
    wait_webhook_reads_clonesets(env)
    env.set_policy(enforcement="enforce")
    try:
        before = active_pods(env, ns)
        if how == "scale":
            scale = ["scale", "clonesets.apps.kruise.io/llm", "--replicas=2"]
        else:
            scale = ["patch", "clonesets.apps.kruise.io", "llm", "--type=merge", "-p",
                     '{"spec":{"replicas":2}}']
        document, done = predicted(env, ns, "llm", 2, lambda: env.kubectl("-n", ns, *scale))
        assert document["allowed"] is False, json.dumps(document, indent=2)
        assert done.code != 0, str(done)
        assert 'admission webhook "scale.poolguard.dev" denied the request' in done.stderr, \
            done.stderr
        assert f"CloneSet {ns}/llm from 3 to 2" in done.stderr, done.stderr
        assert read_cloneset(env, ns, "llm")["spec"]["replicas"] == 3
        assert not deleted_since(before, active_pods(env, ns))
    finally:
        env.set_policy(enforcement="warn")
