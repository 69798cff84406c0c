"""The rebalance plan on small clusters: who moves, who stays and why, and which nodes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import factories as f
from tests.support.overflow_clusters import GPU, TAINT, TOLERATION, gpu_node
from webhook.core.consolidation.rebalance.home_pool import home_of
from webhook.core.consolidation.rebalance.rebalance_plan import plan_rebalance
from webhook.core.consolidation.rebalance.resource_requests import in_units, pod_requests
from webhook.core.consolidation.rebalance.scheduling_fit import admits
from webhook.core.policy.policy import parse_policy
from webhook.core.view.snapshot import Snapshot

POOLS = [{"name": "inference", "deletionCost": 1000, "protected": True},
         {"name": "hybrid", "deletionCost": -100}]
POLICY = parse_policy({"pools": POOLS, "rebalance": {
    "enabled": True, "priorityClassPools": {"serving-high": "inference"}}})


def prefers(pool: str, weight: int = 100) -> dict[str, Any]:
    return {"weight": weight, "preference": {"matchExpressions": [
        {"key": "node.usage", "operator": "In", "values": [pool]}]}}


def service(name: str, placements: list[tuple[str, int]], *, home: str = "inference",
            cpu: int = 1, status: dict[str, Any] | None = None,
            **spec: Any) -> list[dict[str, Any]]:
    """A settled Deployment (unless `status` says otherwise), its ReplicaSet and its pods,
    one per (node, GPUs)."""
    count = len(placements)
    deployment = f.deployment(name, replicas=count)
    deployment["status"] = {"observedGeneration": 1, "replicas": count, "readyReplicas": count,
                            "updatedReplicas": count, **(status or {})}
    rs = f.replicaset(f"{name}-abc", owner=deployment, pod_hash="abc", replicas=count)
    rs["status"]["readyReplicas"] = count
    pods = []
    for index, (node, gpus) in enumerate(placements):
        pod = f.pod(f"{name}-{index}", node_name=node, owner=rs)
        pod["spec"]["containers"][0]["resources"] = {
            "requests": {GPU: str(gpus), "cpu": str(cpu)}, "limits": {GPU: str(gpus)}}
        pod["spec"]["affinity"] = {"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [prefers(home)]}}
        pod["spec"].update(spec)
        pods.append(pod)
    return [deployment, rs, *pods]


def training(name: str, node: str, gpus: int) -> dict[str, Any]:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "ml", "uid": f.uid_for("job/train")},
           "spec": {"selector": {"matchLabels": {"job": "train"}}}}
    pod = f.pod(name, node_name=node, owner=job)
    pod["spec"]["containers"][0]["resources"] = {"limits": {GPU: str(gpus)}}
    return pod


def nodes(inference: int, hybrid: int) -> list[dict[str, Any]]:
    return [gpu_node(f"inf-{i}", "inference", False) for i in range(inference)] + \
        [gpu_node(f"hyb-{i}", "hybrid", False) for i in range(hybrid)]


def plan(*objects: dict[str, Any], policy=POLICY) -> dict[str, Any]:
    return plan_rebalance(Snapshot(objects), policy).as_json()


def reasons(document: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["reason"] for s in document["skipped"]}


def test_overflow_goes_home_and_frees_its_node() -> None:
    document = plan(*nodes(1, 2),
                    *service("llm", [("inf-0", 4), ("hyb-0", 2), ("hyb-0", 2)]),
                    *service("small", [("hyb-1", 1)], home="hybrid"))
    assert document["moves"] == [
        {"namespace": "ml", "name": f"llm-{i}", "workload": "deployment/ml/llm",
         "node": "hyb-0", "pool": "hybrid", "toPool": "inference", "gpus": 2} for i in (1, 2)]
    assert document["freedNodes"] == [{"node": "hyb-0", "pool": "hybrid", "gpus": 8}]
    assert reasons(document) == {"small-0": "it is at home: pool hybrid (preferred "
                                 "node affinity)"}


def test_a_node_with_a_training_pod_is_not_emptied_and_says_why() -> None:
    document = plan(*nodes(1, 1), *service("llm", [("hyb-0", 2)]), training("train-0", "hyb-0", 4))
    assert document["moves"] == [] and document["freedNodes"] == []
    why = reasons(document)
    assert "Job" in why["train-0"] and "not a serving workload" in why["train-0"]
    assert why["llm-0"].startswith("node hyb-0 would not be freed: its pod ml/train-0 stays")


@pytest.mark.parametrize(("status", "expected"), [
    ({"updatedReplicas": 1}, "has updatedReplicas 1, not the 2"),
    ({"observedGeneration": 0}, "has not observed its latest spec"),
    ({"readyReplicas": 1}, "has readyReplicas 1"),
])
def test_an_unsettled_workload_does_not_move(status: dict[str, Any], expected: str) -> None:
    document = plan(*nodes(1, 1), *service("llm", [("hyb-0", 2), ("hyb-0", 2)], status=status))
    assert document["moves"] == []
    assert "deployment/ml/llm is not settled" in reasons(document)["llm-0"]
    assert expected in reasons(document)["llm-0"]


def test_an_unready_pod_holds_back_its_whole_workload() -> None:
    objects = [*nodes(1, 2), *service("llm", [("hyb-0", 2), ("hyb-1", 2)])]
    objects[-1]["status"]["conditions"][1]["status"] = "False"
    document = plan(*objects)
    assert document["moves"] == []
    assert reasons(document)["llm-0"].endswith("its pod llm-1 is not Ready")


def test_the_fewest_gpus_go_first_when_pods_are_alike() -> None:
    # room for 4 GPUs: hyb-1 (2 pods) fits, hyb-0 (3 pods) does not fit beside it
    document = plan(*nodes(1, 2), *service("filler", [("inf-0", 4)]),
                    *service("llm", [("hyb-0", 1), ("hyb-0", 1), ("hyb-0", 1),
                                     ("hyb-1", 1), ("hyb-1", 1)]))
    assert [n["node"] for n in document["freedNodes"]] == ["hyb-1"]
    assert "inference has no room for its 3 GPU pods (3 GPUs) beside the 1 nodes chosen" \
        in reasons(document)["llm-0"]


def test_when_pods_differ_two_nodes_win_over_the_smallest() -> None:
    # hyb-0 holds the fewest GPUs but asks for most of the CPU: the two others fit instead
    document = plan(*nodes(1, 3), *service("cpu-heavy", [("hyb-0", 1)], cpu=60),
                    *service("llm", [("hyb-1", 4), ("hyb-2", 4)], cpu=10))
    assert [n["node"] for n in document["freedNodes"]] == ["hyb-1", "hyb-2"]


def test_a_tainted_home_node_takes_only_pods_that_tolerate_it() -> None:
    inference = gpu_node("inf-0", "inference", True)
    assert inference["spec"]["taints"] == [TAINT]
    document = plan(inference, *nodes(0, 2),
                    *service("plain", [("hyb-0", 2)]),
                    *service("tolerant", [("hyb-1", 2)], tolerations=[TOLERATION]))
    assert [m["name"] for m in document["moves"]] == ["tolerant-0"]
    assert reasons(document)["plain-0"] == (
        "no node of its home pool inference would admit it: inf-0 has the taint "
        "dedicated=serving:NoSchedule, which the pod does not tolerate")


def test_the_home_comes_from_the_priority_class_when_the_affinity_names_none() -> None:
    objects = service("llm", [("hyb-0", 2)])
    pod = objects[-1]
    del pod["spec"]["affinity"]
    pod["spec"]["priorityClassName"] = "serving-high"
    document = plan(*nodes(1, 1), *objects)
    assert [m["name"] for m in document["moves"]] == ["llm-0"]
    pod["spec"]["priorityClassName"] = "batch"
    assert "names a home pool" in reasons(plan(*nodes(1, 1), *objects))["llm-0"]


def test_the_heaviest_preferred_term_names_the_home() -> None:
    pod = f.pod("p")
    terms = [prefers("hybrid", 10), prefers("inference", 80)]
    pod["spec"]["affinity"] = {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": terms}}
    assert home_of(pod, POLICY).pool == "inference"
    terms.append(prefers("hybrid", 80))
    assert home_of(pod, POLICY).pool is None
    assert "weighs pools hybrid and inference equally (80)" in home_of(pod, POLICY).describe()


def test_nothing_moves_toward_an_unprotected_pool() -> None:
    policy = parse_policy({"pools": [*POOLS, {"name": "spare", "deletionCost": 0}]})
    document = plan(*nodes(1, 1), gpu_node("spare-0", "spare", False),
                    *service("llm", [("hyb-0", 2)], home="spare"), policy=policy)
    assert document["moves"] == []
    assert "is not protected" in reasons(document)["llm-0"]


def test_the_scheduler_filters_are_read_as_the_scheduler_reads_them() -> None:
    node = gpu_node("inf-0", "inference", False)
    node["metadata"]["labels"]["gpu.rank"] = "3"
    pod = f.pod("p")
    assert admits(pod, node) is None
    pod["spec"]["nodeSelector"] = {"node.usage": "hybrid"}
    assert admits(pod, node) == "does not match the pod's nodeSelector"
    del pod["spec"]["nodeSelector"]
    terms = [{"matchExpressions": [{"key": "gpu.rank", "operator": "Gt", "values": ["5"]}]},
             {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x"]}]}]
    pod["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    assert admits(pod, node) == "does not match the pod's required node affinity"
    terms[1]["matchFields"][0]["values"] = ["inf-0"]
    assert admits(pod, node) is None
    node["spec"] = {"unschedulable": True}
    assert "node.kubernetes.io/unschedulable:NoSchedule" in admits(pod, node)
    pod["spec"]["tolerations"] = [{"operator": "Exists"}]
    assert admits(pod, node) is None
    node["status"]["conditions"][0]["status"] = "False"
    assert admits(pod, node) == "is not Ready"


def test_requests_are_summed_as_the_scheduler_sums_them() -> None:
    assert (in_units("cpu", "250m"), in_units("cpu", "1.5"), in_units("memory", "1Gi"),
            in_units("memory", "1e3"), in_units("memory", "1.5k"), in_units("cpu", "x")) == \
        (250, 1500, 2**30, 1000, 1500, 0)
    pod = f.pod("p")
    pod["spec"]["containers"] = [
        {"name": "a", "resources": {"requests": {"cpu": "500m"}, "limits": {GPU: "2"}}},
        {"name": "b", "resources": {"requests": {"cpu": "1", GPU: "1"}}}]
    pod["spec"]["initContainers"] = [
        {"name": "init", "resources": {"requests": {"cpu": "4"}}},
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}]
    pod["spec"]["overhead"] = {"cpu": "100m"}
    assert pod_requests(pod, (GPU, "cpu", "memory")) == \
        {GPU: 3, "cpu": 4100, "memory": 0, "pods": 1}
    pod["spec"]["initContainers"].reverse()  # the sidecar now runs beside the init container
    assert pod_requests(pod, ("cpu",))["cpu"] == 5100
