"""Whole GPU nodes freed by the real controllers, in the order poolguard's ranks give.

The fake Nodes advertise `nvidia.com/gpu: 8`; the real scheduler places GPU pods of a
Deployment spread over the inference and hybrid pools, and a training pod on a hybrid
node; the reconciler ranks the hybrid pods by node. `kubectl scale` shrinks the
Deployment step by step: at every step the hybrid nodes the real controllers leave
without a GPU pod are the ones `plan` names in `freedNodes`, as many as the best choice
of the same number of pods could free (counted here from the pods before the step), and
no inference pod goes.

The real HPA then does the same through poolguard's clamp (the policy's
`scaleDown.autoscalers`, enforcement `clamp`): first a step that breaks no rule, which
the clamp webhook sees and leaves as it is, then a step to `minReplicas` that would take
inference pods below `minProtectedReplicas`, which the clamp lowers to the count
`plan --as` the HPA's user names. Each step frees plan's `freedNodes`, the best possible,
and leaves every inference pod in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import wait_for
from tests.e2e.harness import Environment, is_active
from tests.e2e.hpa import HPA_USER, MetricsAPI, ScaleWrite, hpa, hpa_event_reasons, scale_writes
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


def gpu_template(app: str, gpus: int, pools: list[str],
                 cpu: str | None = None) -> dict[str, Any]:
    """Pods of `gpus` GPUs on `pools`; `cpu` requested too (what the HPA's utilization is
    measured against)."""
    template = pod_template(app, pools=pools)
    resources: dict[str, Any] = {"limits": {GPU: str(gpus)}}
    if cpu is not None:
        resources["requests"] = {"cpu": cpu}
    template["spec"]["containers"][0]["resources"] = resources
    return template


@pytest.fixture
def gpu_namespace(env: Environment) -> Iterator[Callable[[str], str]]:
    """Makes namespaces for one test and deletes them afterwards, waiting until their pods
    are gone: GPUs still held would change where the next test's pods are placed."""
    made: list[str] = []

    def make(name: str) -> str:
        made.append(namespace(env, name))
        return name

    yield make
    for name in made:
        env.delete_namespace(name)
    for name in made:
        wait_for(f"the pods of namespace {name} to be gone",
                 lambda name=name: not env.pods(name), timeout=120, interval=0.5)


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


def place_gpu_workloads(env: Environment, ns: str, cpu: str | None = None) -> dict[str, str]:
    """A 4-GPU training pod on a hybrid node, then 12 2-GPU `serve` pods over 3 inference
    and 3 hybrid nodes (the scheduler spreads them), ranked by the reconciler; the serve
    pods as name -> uid."""
    apply(env, ns, deployment("train", 1, gpu_template("train", 4, ["hybrid"])))
    wait_running(env, ns, "app=train", 1)
    apply(env, ns, deployment("serve", 12, gpu_template("serve", 2, ["inference", "hybrid"],
                                                        cpu)))
    wait_running(env, ns, "app=serve", 12)
    wait_for("the reconciler to rank every pod", lambda: ranks_true(env, ns), timeout=120)
    return {n: p["metadata"]["uid"] for n, p in active_pods(env, ns).items()
            if n.startswith("serve-")}


def on_inference(env: Environment, ns: str, serve: dict[str, str]) -> dict[str, str]:
    """The serve pods (name -> uid) the scheduler put on the inference pool."""
    pools = env.node_pool()
    pods = active_pods(env, ns)
    return {n: uid for n, uid in serve.items()
            if pools[pods[n]["spec"]["nodeName"]] == "inference"}


def untouched(env: Environment, ns: str, pods: dict[str, str]) -> bool:
    """Every pod of `pods` (name -> uid) still active, the same pod (not recreated)."""
    now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in env.pods(ns) if is_active(p)}
    return all(now.get(name) == uid for name, uid in pods.items())


def test_scale_downs_free_the_nodes_plan_names_and_the_best_possible(
        env: Environment, gpu_namespace: Callable[[str], str]) -> None:
    env.start_reconciler()
    ns = gpu_namespace("consolidate")
    serve = place_gpu_workloads(env, ns)
    inference = set(on_inference(env, ns, serve))
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
        report("kubectl scale", freed, document, best)
        assert freed == {entry["node"] for entry in document["freedNodes"]}, document
        assert len(freed) == best == document["bestFreedNodes"]
        assert inference <= set(active_pods(env, ns)), "an inference pod was deleted"
        wait_for("the ranks to follow", lambda: ranks_true(env, ns), timeout=120)


# --- the real HPA through the clamp ----------------------------------------------------------

MIN_REPLICAS = 2


def hpa_clamped(env: Environment) -> None:
    """The installed policy clamps the HPA's scale-downs (what this test goes through)."""
    autoscalers = yaml.safe_load(env.policy_file.read_text())["scaleDown"]["autoscalers"]
    assert HPA_USER in autoscalers["users"] and autoscalers["enforcement"] == "clamp", \
        autoscalers


def cheapest_hybrid_node(env: Environment, ns: str) -> int:
    """How many serve pods hold, alone, the hybrid node they hold least: a scale-down of
    that many frees one node at best."""
    view = cluster_view(env, ns)
    owner = owner_of(next(p for p in view.pods(ns)
                          if p["metadata"]["name"].startswith("serve-")))
    prices = []
    for node in view.nodes():
        name = node["metadata"]["name"]
        if POLICY.pool_of_node(node) != "hybrid":
            continue
        mine, others = node_load(POLICY, name, node, view.pods_on_node(name)).holders(owner)
        if mine and not others:
            prices.append(mine)
    assert prices, "no hybrid node that only serve pods hold: nothing to free"
    return min(prices)


def hpa_step(env: Environment, ns: str, start: Callable[[], object], replicas: int,
             inference: dict[str, str]) -> tuple[set[str], list[ScaleWrite]]:
    """Let the HPA shrink `serve` to `replicas` (`start` makes it act); the hybrid nodes
    this freed and the HPA's scale writes it took."""
    held_before = held_hybrid_nodes(env, ns)
    writes_before = len(scale_writes(env, ns, "serve"))
    start()
    wait_for(f"the HPA to take serve to {replicas}", lambda: env.apps.read_namespaced_deployment(
        "serve", ns).spec.replicas == replicas, timeout=90)
    wait_settled(env, ns)
    assert untouched(env, ns, inference), "an inference pod was deleted"
    # the audit log is written after the response: wait for the write's event
    writes = wait_for("the HPA's scale write in the audit log",
                      lambda: scale_writes(env, ns, "serve")[writes_before:], timeout=30,
                      interval=1.0)
    return held_before - held_hybrid_nodes(env, ns), writes


def report(step: str, freed: set[str], document: dict[str, Any], best: int) -> None:
    """One line per step for the log (`pytest -s`): what was freed against the figures."""
    print(f"\n{step} {document['replicas']['from']}->{document['replicas']['to']}: freed "
          f"{sorted(freed)}; plan's freedNodes "
          f"{sorted(e['node'] for e in document['freedNodes'])}, bestFreedNodes "
          f"{document['bestFreedNodes']}; best counted here {best}")


def test_the_real_hpa_frees_through_the_clamp_what_plan_names(
        env: Environment, metrics_api: MetricsAPI,
        gpu_namespace: Callable[[str], str]) -> None:
    hpa_clamped(env)
    env.start_reconciler()
    ns = gpu_namespace("consolidate-hpa")
    serve = place_gpu_workloads(env, ns, cpu="1")  # each pod reports 1% of it: the HPA shrinks
    inference = on_inference(env, ns, serve)
    replicas, policy = len(serve), str(env.policy_file)

    # 1. the HPA's minReplicas one node's worth below: no rule broken, the clamp (called) keeps it
    step = cheapest_hybrid_node(env, ns)
    target = replicas - step
    best = best_now(env, ns, step)
    document = plan_json(env, f"deployment/{ns}/serve", target, "--as", HPA_USER,
                         "--policy", policy)
    assert document["allowed"] is True and document["clampedTo"] is None, document
    freed, writes = hpa_step(env, ns, lambda: apply(env, ns, hpa("serve", target, replicas)),
                             target, inference)
    report("HPA, not clamped", freed, document, best)
    assert writes[0] == ScaleWrite(200, clamp_called=True, mutated=False, clamped=""), writes
    assert HPA_USER in metrics_api.users(f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods")
    assert freed == {entry["node"] for entry in document["freedNodes"]}, document
    assert len(freed) == best == document["bestFreedNodes"] >= 1, (freed, best, document)
    wait_for("the ranks to follow", lambda: ranks_true(env, ns), timeout=120)

    # 2. the inference pool must keep its replicas; the HPA asks for fewer: clamped
    env.set_policy(minProtectedReplicas=len(inference))
    try:
        asked = plan_json(env, f"deployment/{ns}/serve", MIN_REPLICAS, "--as", HPA_USER,
                          "--policy", policy)
        clamped_to = asked["clampedTo"]
        assert clamped_to == len(inference), asked  # every hybrid pod goes, nothing more
        document = plan_json(env, f"deployment/{ns}/serve", clamped_to, "--policy", policy)
        assert document["allowed"] is True, document
        best = best_now(env, ns, target - clamped_to)
        freed, writes = hpa_step(env, ns, lambda: env.kubectl(
            "-n", ns, "patch", "hpa", "serve", "--type=merge",
            "-p", f'{{"spec":{{"minReplicas":{MIN_REPLICAS}}}}}', check=True),
            clamped_to, inference)
        report(f"HPA asking {MIN_REPLICAS}, clamped", freed, document, best)
        assert writes[0] == ScaleWrite(200, clamp_called=True, mutated=True, clamped=(
            f"{target}->{MIN_REPLICAS} became {target}->{clamped_to}")), writes
        assert freed == {entry["node"] for entry in document["freedNodes"]}, document
        assert len(freed) == best == document["bestFreedNodes"], (freed, best, document)
        # the HPA was never refused, only answered with the clamped count: a write that
        # raced the Deployment controller's status update (409 Conflict) is retried by the
        # HPA in the same sync (RetryOnConflict) and is no FailedRescale
        writes = scale_writes(env, ns, "serve")
        assert all(w.code == 200 or (w.code, w.reason) == (409, "Conflict") for w in writes), \
            writes
        assert writes[-1].code == 200, writes
        assert "FailedRescale" not in hpa_event_reasons(env, ns, "serve")
        assert untouched(env, ns, inference), "an inference pod was deleted"
    finally:
        env.kubectl("-n", ns, "delete", "--ignore-not-found", "hpa", "serve")
        env.set_policy(minProtectedReplicas=0)
