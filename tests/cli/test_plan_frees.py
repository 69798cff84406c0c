"""`plan` shows what a scale-down frees: nodes, GPUs per pool, the best possible.

A GPU state file (8-GPU nodes, one Deployment over inference and hybrid nodes, a training
pod on one hybrid node) whose pods carry the costs the reconciler writes; plan is run as
a person runs it, and what it reports is checked against the nodes a person can count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support import factories as f
from tests.support.gpu_clusters import gpu_node, gpu_pod
from webhook.core.policy.policy import default_policy
from webhook.core.view.snapshot import Snapshot
from webhook.reconciler.preview import preview


def gpu_state(tmp_path: Path) -> Path:
    """inf-1 (4 serve pods), hyb-1 (1 serve pod), hyb-2 (2), hyb-3 (1 + training)."""
    deployment = f.deployment("serve", replicas=8)
    rs = f.replicaset("serve-abc", owner=deployment, pod_hash="abc", replicas=8)
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "ml", "uid": f.uid_for("job")},
           "spec": {"selector": {"matchLabels": {"job": "train"}}}}
    places = ["inf-1"] * 4 + ["hyb-1", "hyb-2", "hyb-2", "hyb-3"]
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
               gpu_node("inf-1", "inference"), *(gpu_node(f"hyb-{i}", "hybrid")
                                                 for i in (1, 2, 3)),
               deployment, rs, gpu_pod("train-0", "hyb-3", 4, job, 0),
               *(gpu_pod(f"serve-{i}", node, 2, rs, 100 * i) for i, node in enumerate(places))]
    view = Snapshot(objects)
    for entry in preview(view, default_policy(), ())["pods"]:
        pod = view.pod(entry["namespace"], entry["name"])
        cost = str(entry["desiredCost"])
        pod["metadata"]["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": cost,
                                          "poolguard.dev/managed-deletion-cost": cost}
    path = tmp_path / "gpu-state.yaml"
    path.write_text(yaml.safe_dump(f.kube_list(*objects)))
    return path


def plan(state: Path, replicas: int, *output: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", "plan", "--state", str(state),
                           "--workload", "deploy/ml/serve", "--replicas", str(replicas),
                           *output], capture_output=True, text=True, timeout=60, check=True)


def test_plan_names_the_nodes_a_scale_down_frees(tmp_path: Path) -> None:
    state = gpu_state(tmp_path)
    document = json.loads(plan(state, 5, "-o", "json").stdout)
    # 3 deletions: hyb-1 (one pod), then hyb-2 (two); hyb-3 keeps the training pod
    assert sorted(v["node"] for v in document["victims"]) == ["hyb-1", "hyb-2", "hyb-2"]
    assert document["freedNodes"] == [{"node": "hyb-1", "pool": "hybrid", "gpus": 8},
                                      {"node": "hyb-2", "pool": "hybrid", "gpus": 8}]
    assert document["freedGpus"] == {"total": 16, "byPool": {"hybrid": 16}}
    assert document["bestFreedNodes"] == 2
    text = plan(state, 5).stdout
    assert ("Frees 2 nodes (16 GPUs: hybrid 16): hyb-1, hyb-2; the best 3 deletions of this "
            "workload could free: 2 nodes.") in text
    assert "Frees 2 nodes (16 GPUs: hybrid 16): hyb-1, hyb-2" in plan(state, 5, "-o",
                                                                        "html").stdout


def test_one_deletion_frees_the_node_with_the_fewest_pods(tmp_path: Path) -> None:
    document = json.loads(plan(gpu_state(tmp_path), 7, "-o", "json").stdout)
    assert [v["node"] for v in document["victims"]] == ["hyb-1"]
    assert document["freedNodes"] == [{"node": "hyb-1", "pool": "hybrid", "gpus": 8}]
    assert "Frees 1 node (8 GPUs: hybrid 8): hyb-1" in plan(gpu_state(tmp_path), 7).stdout
