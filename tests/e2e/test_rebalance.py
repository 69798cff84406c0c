"""Overflow goes home: the live rebalancer against the real scheduler and controllers.

The fake Nodes advertise `nvidia.com/gpu: 8`. A training pod holds one hybrid node; the
inference-only Deployment `batch` holds two thirds of the inference pool; the real
scheduler then places `serve` (4 pods of 4 GPUs that prefer the inference pool) on the
inference room left and, with one hybrid node cordoned for the while, its overflow on
the other; `chat` (2 such pods) overflows onto the last hybrid node. `batch` scales to 0:
the inference pool has room for every overflow pod.

The reconciler runs as users run it: the rebalance overlay's RBAC applied beside the
local-dev install, `--rebalance-interval 1` and `--rebalance-moves-per-minute 60` so
that the steps take seconds, and the policy's `rebalance.enabled` set in the policy
ConfigMap (and its mounted file) for this module only.

1. Dry run: with `rebalance.enabled: false`, `rebalance --dry-run` lists chat's pods (serve
   has an unready pod, so none of its pods moves, and says why); the reconciler, over
   several Lease renewals, evicts nothing and taints nothing.
2. Enabled: the rebalancer evicts exactly the pods the dry run listed; the real scheduler
   places every replacement in the inference pool; chat's hybrid node ends with no GPU
   pod and no taint, while serve (still with its unready pod) keeps every pod.
3. serve's pod is Ready again, but its PodDisruptionBudget allows no disruption: the
   rebalancer taints serve's node and tries, each eviction is refused and the reconciler
   says why; nothing is evicted. The budget then allows one disruption: the pods the dry
   run lists go home, one at a time, and the node is freed.
4. An 8-GPU training pod schedules on a freed node; no poolguard taint is left.

Throughout, no workload has fewer Ready pods than its budget allows, and no pod is
placed in the hybrid pool. The time from the room being there for the rebalancer to the
node being free is printed (`pytest -s`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import wait_for
from tests.e2e.harness import REPO, Environment, is_active, node_names
from tests.e2e.test_consolidation import gpu_namespace, gpu_template
from tests.e2e.test_scenarios import scale, set_ready
from tests.e2e.workloads import (
    PodRecorder,
    active_pods,
    apply,
    deployment,
    running_ready,
    wait_running,
)
from webhook.core.consolidation.pod_cost import node_load
from webhook.core.policy.policy import default_policy
from webhook.reconciler.rebalancer import TAINT_KEY

__all__ = ["gpu_namespace"]  # the fixture, imported for this module's test

POLICY = default_policy()
REBALANCE_RBAC = REPO / "manifests" / "overlays" / "rebalance" / "rebalancer-rbac.yaml"
RECONCILE_ARGS = ("--rebalance-interval", "1", "--rebalance-moves-per-minute", "60")
LEASE = "/apis/coordination.k8s.io/v1/namespaces/poolguard/leases/poolguard-reconciler"


# --- the module's setup: RBAC, reconciler flags, policy ---------------------------------------


def set_rebalance(env: Environment, enabled: bool) -> None:
    """The policy's `rebalance.enabled`, in the ConfigMap and in the mounted file (the
    reconciler follows the file)."""
    policy = yaml.safe_load(env.policy_file.read_text())
    policy["rebalance"] = {"enabled": enabled}
    env.write_policy(yaml.safe_dump(policy, sort_keys=False))


@pytest.fixture(scope="module")
def rebalancer(env: Environment) -> Iterator[None]:
    """The rebalancer's RBAC and a reconciler with short rebalance intervals, rebalance
    off; afterwards the policy, the RBAC and the reconciler as they were."""
    saved_policy = env.policy_file.read_text()
    was_running = env.reconciler is not None and env.reconciler.alive()
    env.kubectl("apply", "-f", str(REBALANCE_RBAC), check=True)
    env.stop_reconciler()
    try:
        set_rebalance(env, False)
        env.start_reconciler(extra_args=RECONCILE_ARGS)
        yield
    finally:
        env.stop_reconciler()  # a stopping leader abandons its batch and removes its taints
        for node in tainted(env):  # and if it died instead: the next modules need the nodes
            env.kubectl("taint", "nodes", node, f"{TAINT_KEY}:NoSchedule-", check=True)
        env.write_policy(saved_policy)
        env.kubectl("delete", "--ignore-not-found", "-f", str(REBALANCE_RBAC), check=True)
        if was_running:
            env.start_reconciler()


# --- workloads --------------------------------------------------------------------------------


def overflow_template(app: str, gpus: int) -> dict[str, Any]:
    """Pods that may run in the inference or the hybrid pool and prefer the inference pool
    (the issue's high-priority services)."""
    template = gpu_template(app, gpus, ["inference", "hybrid"])
    template["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": 100, "preference": {
            "matchExpressions": [{"key": "node.usage", "operator": "In",
                                  "values": ["inference"]}]}}]
    return template


def training_pod(name: str, gpus: int) -> dict[str, Any]:
    """A training pod of the hybrid pool: a bare pod (the e2e control plane runs no Job
    controller), which the rebalancer never moves either."""
    template = gpu_template(name, gpus, ["hybrid"])
    template["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **template["metadata"]},
            "spec": template["spec"]}


def budget(name: str, min_available: int) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"minAvailable": min_available,
                     "selector": {"matchLabels": {"app": name}}}}


def cordoned(env: Environment, node: str, on: bool) -> None:
    env.kubectl("cordon" if on else "uncordon", node, check=True)


# --- reading the cluster ----------------------------------------------------------------------


def nodes_of(env: Environment, ns: str, app: str) -> dict[str, str]:
    """The active pods of `app` as name -> node."""
    return {name: pod["spec"].get("nodeName", "") for name, pod in active_pods(env, ns).items()
            if pod["metadata"]["labels"].get("app") == app}


def tainted(env: Environment) -> set[str]:
    return {node["metadata"]["name"] for node in env.api_get("/api/v1/nodes")["items"]
            if any(t["key"] == TAINT_KEY for t in node["spec"].get("taints") or ())}


def freed(env: Environment, node: str) -> bool:
    """No GPU pod holds `node` and poolguard's taint is gone from it: training may come."""
    obj = env.api_get(f"/api/v1/nodes/{node}")
    pods = [p for p in env.api_get(f"/api/v1/pods?fieldSelector=spec.nodeName={node}")["items"]
            if is_active(p)]
    return (node_load(POLICY, node, obj, pods).free
            and not any(t["key"] == TAINT_KEY for t in obj["spec"].get("taints") or ()))


def dry_run(env: Environment) -> dict[str, Any]:
    """`rebalance --dry-run -o json` on the live cluster, with the installed policy."""
    result = env.poolguard("rebalance", "--kubeconfig", env.plane.kubeconfig(), "--policy",
                           env.policy_file, "--dry-run", "--output", "json")
    assert result.code == 0, str(result)
    return dict(json.loads(result.stdout))


def moves(plan: Mapping[str, Any]) -> set[str]:
    return {move["name"] for move in plan["moves"]}


def lease_renewals(env: Environment, count: int) -> None:
    """Until the reconciler has renewed its Lease `count` times from now: it has been
    leading, its rebalance loop stepping each second, all the while."""
    seen = [env.api_get(LEASE)["spec"]["renewTime"]]

    def renewed() -> bool:
        now = env.api_get(LEASE)["spec"]["renewTime"]
        if now != seen[-1]:
            seen.append(now)
        return len(seen) > count

    wait_for(f"{count} renewals of the reconciler's Lease", renewed, timeout=30)


def reconciler_log(env: Environment, offset: int) -> str:
    return (env.run_dir / "logs" / "poolguard-reconcile.log").read_bytes()[offset:].decode(
        errors="replace")


def evicted(recorder: PodRecorder) -> set[str]:
    """The pods seen being deleted since the recorder started (only the rebalancer deletes
    pods of serve and chat here)."""
    return {v["metadata"]["name"] for v in recorder.versions[recorder.listed:]
            if v["metadata"].get("deletionTimestamp")
            and v["metadata"]["labels"].get("app") in ("serve", "chat")}


def seen_evicted(recorder: PodRecorder, expected: set[str]) -> set[str]:
    """`evicted`, once the watch (which may lag the reads) has delivered the deletions of
    at least the `expected` pods."""
    return wait_for(f"the watch to see {sorted(expected)} deleted",
                    lambda: evicted(recorder) if evicted(recorder) >= expected else None,
                    timeout=30)


def ready_counts(recorder: PodRecorder, app: str) -> list[int]:
    """How many Running and Ready pods `app` had: as listed, then after each change the
    watch saw."""
    ready = {v["metadata"]["uid"]: running_ready(v) for v in recorder.versions[:recorder.listed]
             if v["metadata"]["labels"].get("app") == app}
    counts = [sum(ready.values())]
    for version in recorder.versions[recorder.listed:]:
        if version["metadata"]["labels"].get("app") == app:
            ready[version["metadata"]["uid"]] = running_ready(version)
            counts.append(sum(ready.values()))
    return counts


def fewest_ready(recorder: PodRecorder, app: str) -> int:
    """The fewest Running and Ready pods `app` had at any moment the watch saw."""
    return min(ready_counts(recorder, app))


def ready_now(recorder: PodRecorder, app: str) -> int:
    return ready_counts(recorder, app)[-1]


def pools_bound(env: Environment, recorder: PodRecorder, apps: tuple[str, ...]
                ) -> dict[str, str]:
    """Every pod of `apps` made since the recorder started, as name -> the pool of the node
    it was bound to."""
    pools = env.node_pool()
    listed = {v["metadata"]["uid"] for v in recorder.versions[:recorder.listed]}
    return {v["metadata"]["name"]: pools[v["spec"]["nodeName"]]
            for v in recorder.versions[recorder.listed:]
            if v["spec"].get("nodeName") and v["metadata"]["labels"].get("app") in apps
            and v["metadata"]["uid"] not in listed}


def until_freed(env: Environment, nodes: list[str], what: str) -> float:
    """Wait until every node of `nodes` is freed; the seconds that took."""
    start = time.monotonic()
    wait_for(what, lambda: all(freed(env, node) for node in nodes), timeout=60, interval=0.25)
    return time.monotonic() - start


# --- the test ---------------------------------------------------------------------------------


def test_overflow_goes_home_and_frees_whole_hybrid_nodes(
        env: Environment, rebalancer: None, gpu_namespace: Callable[[str], str]) -> None:
    ns = gpu_namespace("rebalance")
    # --- the real scheduler's placement
    apply(env, ns, training_pod("train", 8))
    (train_node,) = {p["spec"]["nodeName"] for p in wait_running(env, ns, "app=train", 1)}
    serve_node, chat_node = sorted(set(node_names("hybrid")) - {train_node})
    apply(env, ns, deployment("batch", 4, gpu_template("batch", 4, ["inference"])))
    wait_running(env, ns, "app=batch", 4)
    cordoned(env, chat_node, True)
    try:
        apply(env, ns, deployment("serve", 4, overflow_template("serve", 4)))
        wait_running(env, ns, "app=serve", 4)
    finally:
        cordoned(env, chat_node, False)
    apply(env, ns, deployment("chat", 2, overflow_template("chat", 4)))
    wait_running(env, ns, "app=chat", 2)
    pools = env.node_pool()
    serve = nodes_of(env, ns, "serve")
    at_home = {name for name, node in serve.items() if pools[node] == "inference"}
    assert len(at_home) == 2 and {serve[n] for n in set(serve) - at_home} == {serve_node}, serve
    assert set(nodes_of(env, ns, "chat").values()) == {chat_node}
    apply(env, ns, budget("serve", 4), budget("chat", 1))
    unready = sorted(at_home)[0]
    set_ready(env, active_pods(env, ns)[unready], False)
    wait_for("serve's Deployment to count its unready pod", lambda: env.apps.
             read_namespaced_deployment("serve", ns).status.ready_replicas == 3, timeout=30)
    untouched = {n: p["metadata"]["uid"] for n, p in active_pods(env, ns).items()
                 if n.startswith(("serve-", "chat-")) or n == "train"}
    recorder = PodRecorder(env, ns, timeout=600)
    try:
        log_start = (env.run_dir / "logs" / "poolguard-reconcile.log").stat().st_size

        # --- 1. room appears; dry run: listed, nothing moves
        assert scale(env, ns, "deployment/batch", 0).code == 0
        # gone, not only terminating: a pod being deleted still holds its node's room
        wait_for("batch's pods to be gone", lambda: not env.pods(ns, "app=batch"), timeout=60)
        plan = dry_run(env)
        chat_pods = set(nodes_of(env, ns, "chat"))
        assert moves(plan) == chat_pods, plan
        assert [n["node"] for n in plan["freedNodes"]] == [chat_node], plan
        reasons = {s["name"]: s["reason"] for s in plan["skipped"]}
        for name in set(serve) - at_home:
            assert f"deployment/{ns}/serve is not settled" in reasons[name], plan
        assert "no controller" in reasons["train"], plan
        lease_renewals(env, 2)
        assert not evicted(recorder) and not tainted(env), "rebalance.enabled: false moved pods"

        # --- 2. enabled: chat's pods go home, serve (unready) stays
        set_rebalance(env, True)
        took = until_freed(env, [chat_node], f"chat's node {chat_node} to be freed")
        print(f"\nrebalance: {chat_node} freed {took:.1f}s after the rebalancer was enabled "
              f"with room for it ({len(chat_pods)} evictions)")
        wait_running(env, ns, "app=chat", 2)
        assert seen_evicted(recorder, chat_pods) == chat_pods
        assert all(untouched[n] == p["metadata"]["uid"] for n, p in active_pods(env, ns).items()
                   if n in untouched and not n.startswith("chat-"))

        # --- 3. serve Ready again, its budget allows no disruption: refused, and said why
        set_ready(env, active_pods(env, ns)[unready], True)
        blocked = f"rebalance: evicting {ns}/serve-"

        def refused() -> bool:  # the API server's words, with the budget's own name
            return any(blocked in line and "The disruption budget serve needs 4 healthy pods"
                       in line for line in reconciler_log(env, log_start).splitlines())

        wait_for("the rebalancer to report serve's eviction refused by its budget", refused,
                 timeout=30)
        plan = dry_run(env)
        serve_moves = set(serve) - at_home
        assert moves(plan) == serve_moves, plan
        assert [n["node"] for n in plan["freedNodes"]] == [serve_node], plan
        assert tainted(env) == {serve_node}
        assert evicted(recorder) == chat_pods, "an eviction went past a budget"
        env.kubectl("-n", ns, "patch", "pdb", "serve", "--type=merge",
                    "-p", '{"spec":{"minAvailable":3}}', check=True)
        took = until_freed(env, [serve_node], f"serve's node {serve_node} to be freed")
        print(f"rebalance: {serve_node} freed {took:.1f}s after serve's budget allowed a "
              f"disruption ({len(serve_moves)} evictions, one at a time)")
        wait_running(env, ns, "app=serve", 4)
        assert seen_evicted(recorder, chat_pods | serve_moves) == chat_pods | serve_moves
        assert recorder.recording(), "the watch ended early: the checks below saw too little"
        replacements = len(chat_pods | serve_moves)
        bound = wait_for("the watch to see every replacement Ready", lambda: (
            ready_now(recorder, "serve") == 4 and ready_now(recorder, "chat") == 2
            and pools_bound(env, recorder, ("serve", "chat"))), timeout=30)
        assert len(bound) == replacements, bound
        assert set(bound.values()) == {"inference"}, bound
        assert fewest_ready(recorder, "serve") >= 3 and fewest_ready(recorder, "chat") >= 1
        assert all(untouched[n] == uid for n, uid in untouched.items() if n in at_home)

        # --- 4. a whole freed node for training
        apply(env, ns, training_pod("train-next", 8))
        (node,) = {p["spec"]["nodeName"] for p in wait_running(env, ns, "app=train-next", 1)}
        assert node in (serve_node, chat_node)
        assert not tainted(env)
    finally:
        recorder.stop()
