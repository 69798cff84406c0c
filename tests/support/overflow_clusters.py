"""Random GPU clusters with overflow, for the rebalance tests and the measurement script.

8-GPU nodes in an inference pool (some tainted `dedicated=serving:NoSchedule`, which
only some services tolerate) and a hybrid pool; training pods (Job-owned) placed first
on some hybrid nodes; high-priority services that prefer the inference pool (by a
preferred node affinity, or only by their PriorityClass, which the policy maps) and
overflow into the hybrid pool; low-priority services that prefer the hybrid pool. Pods
arrive interleaved and the test's scheduler puts each in its preferred pool when a node
there admits it and has room, else in the other pool. Then room appears: a service
shrinks and inference nodes may be added. Some services are left unsettled (a rollout
under way, an unready pod, a spec not yet observed). CPU requests vary so that CPU,
not only GPUs, can bound the room.

`OverflowCluster` keeps what the generator knows (each pod's service, its home, whether
its service is settled), so the tests can judge a plan without the planner's code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.support import factories as f

GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 8
CPU_PER_NODE = 64
TAINT = {"key": "dedicated", "value": "serving", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "serving",
              "effect": "NoSchedule"}
HIGH_CLASS = "serving-high"
UNSETTLED_WAYS = ("rollout", "unready", "generation")


@dataclass
class Service:
    name: str
    home: str  # the pool its pods prefer
    gpus: int
    cpu: int
    tolerates: bool
    by_class: bool  # its home comes from its PriorityClass only, not its affinity
    unsettled: str | None = None  # one of UNSETTLED_WAYS
    pods: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PodInfo:
    service: Service | None  # None: a training pod
    gpus: int
    cpu: int
    node: str


@dataclass
class OverflowCluster:
    objects: list[dict[str, Any]] = field(default_factory=list)
    inference: list[str] = field(default_factory=list)
    hybrid: list[str] = field(default_factory=list)
    tainted: set[str] = field(default_factory=set)
    pods: dict[tuple[str, str], PodInfo] = field(default_factory=dict)

    def free(self) -> dict[str, tuple[int, int]]:
        """Each inference node's free (GPUs, CPU cores)."""
        free = {name: (GPUS_PER_NODE, CPU_PER_NODE) for name in self.inference}
        for info in self.pods.values():
            if info.node in free:
                gpus, cpu = free[info.node]
                free[info.node] = (gpus - info.gpus, cpu - info.cpu)
        return free


def gpu_node(name: str, pool: str, tainted: bool) -> dict[str, Any]:
    node = f.node(name, pool)
    node["status"]["allocatable"] = {GPU: str(GPUS_PER_NODE), "cpu": str(CPU_PER_NODE),
                                     "memory": "512Gi", "pods": "110"}
    if tainted:
        node["spec"] = {"taints": [dict(TAINT)]}
    return node


def random_overflow_cluster(rng: random.Random, max_hybrid: int = 6) -> OverflowCluster:
    """One random cluster (see the module docstring)."""
    cluster = OverflowCluster()
    cluster.inference = [f"inf-{i}" for i in range(rng.randint(1, 3))]
    cluster.hybrid = [f"hyb-{i}" for i in range(rng.randint(2, max_hybrid))]
    cluster.tainted = {n for n in cluster.inference if rng.random() < 0.3}
    free = {n: [GPUS_PER_NODE, CPU_PER_NODE] for n in cluster.inference + cluster.hybrid}
    _train(rng, cluster, free)
    services = _services(rng)
    arrivals = [(s, i) for s in services for i in range(rng.randint(1, 10))]
    rng.shuffle(arrivals)
    for service, index in arrivals:
        node = _schedule(cluster, free, service)
        if node is None:
            continue
        free[node][0] -= service.gpus
        free[node][1] -= service.cpu
        service.pods.append(_pod(service, index, node))
    _room_appears(rng, cluster, services)
    for service in services:
        _emit(rng, cluster, service)
    cluster.objects[:0] = [gpu_node(n, "inference", n in cluster.tainted)
                           for n in cluster.inference] + \
        [gpu_node(n, "hybrid", False) for n in cluster.hybrid]
    return cluster


def _train(rng: random.Random, cluster: OverflowCluster, free: dict[str, list[int]]) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "ml", "uid": f.uid_for("job/train")},
           "spec": {"selector": {"matchLabels": {"job": "train"}}}}
    trained = rng.sample(cluster.hybrid, rng.randint(0, len(cluster.hybrid) // 2))
    for index, node in enumerate(trained):
        gpus = rng.choice((2, 4, 8))
        pod = f.pod(f"train-{index}", node_name=node, owner=job)
        pod["spec"]["containers"][0]["resources"] = {"requests": {GPU: str(gpus), "cpu": "4"},
                                                     "limits": {GPU: str(gpus)}}
        free[node][0] -= gpus
        free[node][1] -= 4
        cluster.objects.append(pod)
        cluster.pods[("ml", pod["metadata"]["name"])] = PodInfo(None, gpus, 4, node)


def _services(rng: random.Random) -> list[Service]:
    services = []
    for index in range(rng.randint(1, 3)):
        services.append(Service(
            f"high-{index}", "inference", rng.choice((1, 2, 4)), rng.choice((2, 8, 20, 40)),
            tolerates=rng.random() < 0.6, by_class=rng.random() < 0.3,
            unsettled=rng.choice(UNSETTLED_WAYS) if rng.random() < 0.25 else None))
    for index in range(rng.randint(0, 2)):
        services.append(Service(f"low-{index}", "hybrid", rng.choice((1, 2)), 2,
                                tolerates=False, by_class=False))
    return services


def _admits(cluster: OverflowCluster, service: Service, node: str) -> bool:
    return node not in cluster.tainted or service.tolerates


def _schedule(cluster: OverflowCluster, free: dict[str, list[int]],
              service: Service) -> str | None:
    """The preferred pool first, then the other; in a pool, the node with most GPUs free."""
    pools = [cluster.inference, cluster.hybrid]
    if service.home == "hybrid":
        pools.reverse()
    for pool in pools:
        fits = [n for n in pool if _admits(cluster, service, n)
                and free[n][0] >= service.gpus and free[n][1] >= service.cpu]
        if fits:
            return max(fits, key=lambda n: (free[n][0], -pool.index(n)))
    return None


def _pod(service: Service, index: int, node: str) -> dict[str, Any]:
    return {"name": f"{service.name}-{index}", "node": node}


def _room_appears(rng: random.Random, cluster: OverflowCluster, services: list[Service]) -> None:
    """A service shrinks (its inference pods go first) and inference nodes may be added."""
    shrinking = rng.choice(services)
    inside = [p for p in shrinking.pods if p["node"] in cluster.inference]
    for pod in rng.sample(inside, rng.randint(0, len(inside))):
        shrinking.pods.remove(pod)
    for index in range(rng.choice((0, 1, 1, 2))):
        name = f"inf-new-{index}"
        cluster.inference.append(name)
        if rng.random() < 0.3:
            cluster.tainted.add(name)


def _emit(rng: random.Random, cluster: OverflowCluster, service: Service) -> None:
    """The service's Deployment, ReplicaSet and pods, with statuses as settled or not."""
    replicas = len(service.pods)
    deployment = f.deployment(service.name, replicas=replicas)
    rs = f.replicaset(f"{service.name}-abc", owner=deployment, pod_hash="abc",
                      replicas=replicas)
    unready = rng.randrange(replicas) if service.unsettled == "unready" and replicas else None
    ready = replicas - (unready is not None)
    deployment["status"] = {"observedGeneration": 1, "replicas": replicas,
                            "readyReplicas": ready, "updatedReplicas": replicas,
                            "availableReplicas": ready}
    if service.unsettled == "rollout" and replicas:
        deployment["status"]["updatedReplicas"] = replicas - 1
    if service.unsettled == "generation":
        deployment["metadata"]["generation"] = 2
    rs["status"] = {"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready}
    if service.unsettled and not replicas:
        service.unsettled = None  # nothing in flight without pods
    cluster.objects += [deployment, rs]
    for index, placed in enumerate(service.pods):
        pod = f.pod(placed["name"], node_name=placed["node"], owner=rs, ready=index != unready)
        pod["spec"]["containers"][0]["resources"] = {
            "requests": {GPU: str(service.gpus), "cpu": str(service.cpu)},
            "limits": {GPU: str(service.gpus)}}
        _prefer(pod, service)
        cluster.objects.append(pod)
        cluster.pods[("ml", placed["name"])] = PodInfo(service, service.gpus, service.cpu,
                                                       placed["node"])


def _prefer(pod: dict[str, Any], service: Service) -> None:
    spec = pod["spec"]
    if service.tolerates:
        spec["tolerations"] = [dict(TOLERATION)]
    if service.by_class:
        spec["priorityClassName"] = HIGH_CLASS
        return
    other = "hybrid" if service.home == "inference" else "inference"
    spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [
            {"key": "node.usage", "operator": "In", "values": [service.home]}]}},
        {"weight": 10, "preference": {"matchExpressions": [
            {"key": "node.usage", "operator": "In", "values": [other]}]}}]}}
