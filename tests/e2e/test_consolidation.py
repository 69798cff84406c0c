"""Whole GPU nodes freed by the real controllers, in the order poolguard's ranks give.

The fake Nodes advertise `nvidia.com/gpu: 8`; the real scheduler places GPU pods of a
Deployment spread over the inference and hybrid pools, and a training pod on a hybrid
node; the reconciler ranks the hybrid pods by node. `kubectl scale` shrinks the
Deployment step by step: at every step the hybrid nodes the real controllers leave
without a GPU pod are the ones `plan` names in `freedNodes`, as many as the best choice
of the same number of pods could free (counted here from the pods before the step), and
no inference pod goes.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.controlplane import wait_for
from tests.e2e.harness import Environment
from tests.e2e.test_scenarios import namespace, scale
from tests.e2e.workloads import (
    active_pods,
    apply,
    deployment,
    pod_template,
    wait_running,
    wait_settled,
)
from tests.e2e.workloads import plan as plan_json
from webhook.core.consolidation.node_occupancy import best_freed, owner_of
from webhook.core.consolidation.pod_cost import node_load
from webhook.core.policy.policy import default_policy
from webhook.core.view.snapshot import Snapshot
from webhook.reconciler.preview import preview

GPU = "nvidia.com/gpu"
POLICY = default_policy()  # the shipped policy: the hybrid pool consolidates


def gpu_template(app: str, gpus: int, pools: list[str]) -> dict[str, Any]:
    template = pod_template(app, pools=pools)
    template["spec"]["containers"][0]["resources"] = {"limits": {GPU: str(gpus)}}
    return template


def cluster_view(env: Environment, ns: str) -> Snapshot:
    nodes = env.api_get("/api/v1/nodes")["items"]
    pods = [p for p in env.api_get("/api/v1/pods")["items"]]
    for obj in nodes:
        obj["kind"] = "Node"
    for obj in pods:
        obj["kind"] = "Pod"
    namespaces = env.api_get("/api/v1/namespaces")["items"]
    for obj in namespaces:
        obj["kind"] = "Namespace"
    return Snapshot([*namespaces, *nodes, *pods])


def ranks_true(env: Environment, ns: str) -> bool:
    entries = preview(cluster_view(env, ns), POLICY, ("kube-system", "poolguard"))["pods"]
    return all(e["deletionCost"] == e["desiredCost"] for e in entries if e["namespace"] == ns)


def held_hybrid_nodes(env: Environment, ns: str) -> set[str]:
    view = cluster_view(env, ns)
    held = set()
    for node in view.nodes():
        name = node["metadata"]["name"]
        load = node_load(POLICY, name, node, view.pods_on_node(name))
        if load.pool == "hybrid" and not load.free:
            held.add(name)
    return held


def best_now(env: Environment, ns: str, deletions: int) -> int:
    view = cluster_view(env, ns)
    pods = [p for p in view.pods(ns) if p["metadata"]["name"].startswith("serve-")]
    loads = [node_load(POLICY, n["metadata"]["name"], n, view.pods_on_node(n["metadata"]["name"]))
             for n in view.nodes() if POLICY.pool_of_node(n) == "hybrid"]
    return best_freed(loads, owner_of(pods[0]), deletions)


def test_scale_downs_free_the_nodes_plan_names_and_the_best_possible(env: Environment) -> None:
    env.start_reconciler()
    ns = namespace(env, "consolidate")
    apply(env, ns, deployment("train", 1, gpu_template("train", 4, ["hybrid"])))
    wait_running(env, ns, "app=train", 1)
    # 2-GPU pods over 3 inference and 3 hybrid nodes (the scheduler spreads them)
    apply(env, ns, deployment("serve", 12, gpu_template("serve", 2, ["inference", "hybrid"])))
    wait_running(env, ns, "app=serve", 12)
    wait_for("the reconciler to rank every pod", lambda: ranks_true(env, ns), timeout=120)
    pools = env.node_pool()
    serve = {n: p for n, p in active_pods(env, ns).items() if n.startswith("serve-")}
    inference = {n for n, p in serve.items() if pools[p["spec"]["nodeName"]] == "inference"}
    hybrid = len(serve) - len(inference)
    replicas = len(serve)
    for step in (1, 2, hybrid - 3):
        if step < 1 or replicas - step < len(inference):
            break
        held_before = held_hybrid_nodes(env, ns)
        best = best_now(env, ns, step)
        document = plan_json(env, f"deployment/{ns}/serve", replicas - step)
        result = scale(env, ns, "deployment/serve", replicas - step)
        assert result.code == 0, str(result)
        replicas -= step
        wait_settled(env, ns)
        freed = held_before - held_hybrid_nodes(env, ns)
        assert freed == {entry["node"] for entry in document["freedNodes"]}, document
        assert len(freed) == best == document["bestFreedNodes"]
        assert inference <= set(active_pods(env, ns)), "an inference pod was deleted"
        wait_for("the ranks to follow", lambda: ranks_true(env, ns), timeout=120)
