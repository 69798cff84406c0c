"""Random GPU clusters for the consolidation tests and the bench.

8-GPU nodes in an inference pool and a hybrid pool; serving Deployments whose pods prefer
the inference pool and overflow into the hybrid one; training pods (Job-owned) on some
hybrid nodes; the scheduler's two placements: pack (the fullest node that fits, as
MostAllocated scoring does) or spread (the emptiest, as LeastAllocated does). Pods of
several Deployments arrive interleaved, so workloads share nodes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.support import factories as f

GPUS_PER_NODE = 8
GPU = "nvidia.com/gpu"


@dataclass
class GpuCluster:
    objects: list[dict[str, Any]] = field(default_factory=list)
    deployments: list[dict[str, Any]] = field(default_factory=list)
    hybrid_nodes: list[str] = field(default_factory=list)


def gpu_node(name: str, pool: str) -> dict[str, Any]:
    node = f.node(name, pool)
    node["status"]["allocatable"] = {GPU: str(GPUS_PER_NODE), "cpu": "64"}
    node["status"]["capacity"] = dict(node["status"]["allocatable"])
    return node


def gpu_pod(name: str, node: str, gpus: int, owner: dict[str, Any], ready_s: int) -> dict[str, Any]:
    ready_time = f"2026-01-01T{ready_s // 3600:02d}:{ready_s // 60 % 60:02d}:{ready_s % 60:02d}Z"
    pod = f.pod(name, node_name=node, owner=owner, ready_time=ready_time)
    pod["spec"]["containers"][0]["resources"] = {"limits": {GPU: str(gpus)},
                                                 "requests": {GPU: str(gpus)}}
    return pod


def random_cluster(rng: random.Random, pack: bool) -> GpuCluster:
    """One random cluster (see the module docstring)."""
    cluster = GpuCluster()
    inference = [f"inf-{i}" for i in range(rng.randint(1, 3))]
    hybrid = [f"hyb-{i}" for i in range(rng.randint(3, 12))]
    cluster.hybrid_nodes = hybrid
    free = {name: GPUS_PER_NODE for name in inference + hybrid}
    cluster.objects += [gpu_node(n, "inference") for n in inference]
    cluster.objects += [gpu_node(n, "hybrid") for n in hybrid]
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "ml", "uid": f.uid_for("job/train")},
           "spec": {"selector": {"matchLabels": {"job": "train"}}}}
    for index, name in enumerate(rng.sample(hybrid, max(1, len(hybrid) // 3))):
        gpus = rng.choice((2, 4, 8))
        free[name] -= gpus
        cluster.objects.append(gpu_pod(f"train-{index}", name, gpus, job, 0))
    arrivals = []
    for index in range(rng.randint(1, 3)):
        name = f"serve-{index}"
        gpus = rng.choice((1, 2, 4))
        replicas = rng.randint(2, 3 * len(hybrid))
        deployment = f.deployment(name, replicas=replicas)
        rs = f.replicaset(f"{name}-abc", owner=deployment, pod_hash="abc", replicas=replicas)
        cluster.deployments.append(deployment)
        cluster.objects += [deployment, rs]
        arrivals += [(name, gpus, rs, i) for i in range(replicas)]
    rng.shuffle(arrivals)
    placed: dict[str, int] = {}
    for name, gpus, rs, i in arrivals:
        node = _place(free, inference, hybrid, gpus, pack)
        if node is None:
            continue
        free[node] -= gpus
        placed[name] = placed.get(name, 0) + 1
        cluster.objects.append(gpu_pod(f"{name}-{i}", node, gpus, rs, rng.randint(1, 80000)))
    for obj in cluster.objects:  # replicas as many as were placed
        if obj["kind"] in ("Deployment", "ReplicaSet"):
            app = obj["metadata"]["name"].removesuffix("-abc")
            obj["spec"]["replicas"] = obj["status"]["replicas"] = placed.get(app, 0)
    return cluster


def _place(free: dict[str, int], inference: list[str], hybrid: list[str], gpus: int,
           pack: bool) -> str | None:
    """The inference pool first (required-by-preference), then the hybrid pool."""
    for pool in (inference, hybrid):
        fits = [name for name in pool if free[name] >= gpus]
        if fits:
            # ties go to the first node, as the scheduler's scores pick one of the best
            return min(fits, key=lambda n: (free[n] if pack else -free[n], pool.index(n)))
    return None
