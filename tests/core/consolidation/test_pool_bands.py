"""Bands in the policy and node occupancy: what a user writes and what poolguard counts."""

from __future__ import annotations

import re

import pytest

from tests.support import factories as f
from tests.support.gpu_clusters import gpu_node, gpu_pod
from webhook.cluster.compact import compact
from webhook.core.consolidation.node_occupancy import gpus_offered, gpus_requested
from webhook.core.consolidation.pod_cost import node_load, wanted_cost
from webhook.core.policy.policy import default_policy, parse_policy
from webhook.core.policy.policy_field import PolicyError
from webhook.core.policy.pool_bands import SLOTS

INFERENCE = {"name": "inference", "deletionCost": 1000, "protected": True}


def test_a_file_that_does_not_mention_consolidation_keeps_flat_costs() -> None:
    policy = parse_policy({"pools": [INFERENCE, {"name": "hybrid", "deletionCost": -100}]})
    assert not policy.consolidates
    rs = f.replicaset("serve", replicas=2)
    pods = [gpu_pod("a", "hyb-1", 1, rs, 1), gpu_pod("b", "hyb-1", 1, rs, 2)]
    load = node_load(policy, "hyb-1", gpu_node("hyb-1", "hybrid"), pods)
    assert wanted_cost(policy, "hybrid", pods[0], load) == -100


def test_the_default_consolidates_the_hybrid_pool_inside_its_band() -> None:
    policy = default_policy()
    hybrid = policy.pool_by_name("hybrid")
    assert hybrid.consolidates and (hybrid.band.low, hybrid.band.high) == (-1073741923, -100)
    rs = f.replicaset("serve", replicas=2)
    pods = [gpu_pod("a", "hyb-1", 1, rs, 1), gpu_pod("b", "hyb-1", 1, rs, 2)]
    node = gpu_node("hyb-1", "hybrid")
    cost = wanted_cost(policy, "hybrid", pods[0], node_load(policy, "hyb-1", node, pods))
    assert hybrid.band.low <= cost <= hybrid.band.high
    assert wanted_cost(policy, "hybrid", pods[0], None) == -100  # node's pods unknown


@pytest.mark.parametrize(("hybrid", "message"), [
    ({"consolidate": "nodes", "bandWidth": SLOTS - 1}, "pools[1].bandWidth: must be at least"),
    ({"consolidate": "yes"}, "pools[1].consolidate: must be one of nodes, none"),
    ({"bandWidth": 1000}, "pools[1].bandWidth: only a pool with consolidate: nodes"),
    ({"consolidate": "nodes", "deletionCost": -2**31 + 10},
     "pools[1].bandWidth: a band of 1073741824 values below -2147483638 leaves the int32"),
])
def test_bad_bands_are_refused_naming_the_field(hybrid: dict, message: str) -> None:
    with pytest.raises(PolicyError, match=re.escape(message)):
        parse_policy({"pools": [INFERENCE, {"name": "hybrid", "deletionCost": -100, **hybrid}]})


def test_overlapping_bands_are_refused_and_both_named() -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy({"pools": [INFERENCE,
                                {"name": "hybrid", "deletionCost": -100, "consolidate": "nodes"},
                                {"name": "training", "deletionCost": -5000}]})
    assert str(err.value) == (
        "policy: pools: the band of pool 'hybrid' [-1073741923, -100] overlaps the band of "
        "pool 'training' -5000; bands must not share a value")


def test_a_protected_band_reaching_into_an_unprotected_one_is_refused() -> None:
    with pytest.raises(PolicyError, match=re.escape(
            "the band of pool 'inference' [-999, 1000] overlaps the band of pool 'hybrid' -100")):
        parse_policy({"pools": [{**INFERENCE, "consolidate": "nodes", "bandWidth": 2000},
                                {"name": "hybrid", "deletionCost": -100}]})


def test_gpu_resources_must_be_extended_resource_names() -> None:
    with pytest.raises(PolicyError, match="gpuResources: must be a non-empty list"):
        parse_policy({"pools": [INFERENCE], "gpuResources": ["gpu"]})
    policy = parse_policy({"pools": [INFERENCE], "gpuResources": ["example.com/tpu"]})
    assert policy.gpu_resources == ("example.com/tpu",)


def test_requests_count_as_the_scheduler_sums_them() -> None:
    pod = f.pod("p")
    pod["spec"]["containers"] = [
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}},  # request = limit
        {"name": "b", "resources": {"requests": {"amd.com/gpu": 1, "cpu": "4"}}}]
    pod["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always",
         "resources": {"requests": {"nvidia.com/gpu": "1"}}},
        {"name": "warmup", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]
    assert gpus_requested(pod, default_policy().gpu_resources) == 8  # the init peak
    pod["spec"]["initContainers"].pop()
    assert gpus_requested(pod, default_policy().gpu_resources) == 4
    # the live cache's compact copy keeps what occupancy reads
    assert gpus_requested(compact("Pod", pod), default_policy().gpu_resources) == 4
    node = gpu_node("n", "hybrid")
    assert gpus_offered(compact("Node", node), default_policy().gpu_resources) == 8


def test_nodes_without_gpus_count_pods_but_not_daemonsets() -> None:
    policy = default_policy()
    daemon = {"apiVersion": "apps/v1", "kind": "DaemonSet",
              "metadata": {"name": "agent", "namespace": "ml", "uid": "d"},
              "spec": {"selector": {"matchLabels": {"app": "agent"}}}}
    rs = f.replicaset("serve")
    pods = [f.pod("agent-x", node_name="cpu-1", owner=daemon),
            f.pod("serve-1", node_name="cpu-1", owner=rs)]
    load = node_load(policy, "cpu-1", f.node("cpu-1", "hybrid"), pods)
    assert load.gpus == 0 and load.holders(pods[1]["metadata"]["ownerReferences"][0]["uid"]) \
        == (1, False)
    assert not load.free
    gone = node_load(policy, "cpu-1", f.node("cpu-1", "hybrid"), pods[:1])
    assert gone.free
