"""Is a pod's workload settled: no rollout, no scale and no unready pod in flight?

A move evicts a pod and lets its controller make a replacement, which is only safe to
plan when the controller is at rest. The pod's controller chain is walked up (a
ReplicaSet to its Deployment or Rollout, a StatefulSet to its LeaderWorkerSet) and
every object on it must say, in the status conventions of apps/v1 and of the other
kinds poolguard knows:

- it has seen its latest spec: `status.observedGeneration` at least `metadata.generation`;
- its pods are what the spec asks for: `status.replicas`, `readyReplicas` (absent is 0,
  as the API server omits zeros) and, where the kind reports them, `updatedReplicas`
  equal to `spec.replicas`; a StatefulSet's `currentRevision` equals `updateRevision`;
- it is not paused mid-rollout (`spec.paused`).

Its own pods must all be Running and Ready and none being deleted: a status can lag
its pods. Only pods of the kinds in the registry (and their ReplicaSets) are serving
workloads; a Job's pod (training), a DaemonSet's, a bare pod or any other controller's
never moves, nor does a LeaderWorkerSet's (its group restarts whole when one pod goes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...kinds.registry import WORKLOAD_KINDS
from ...objects.kube import meta, name_of, replicas_of, spec_of, status_of
from ...objects.ownership import controller_of
from ...view.cluster import ClusterView
from ...view.resource import REPLICASETS

GROUP_KIND = "LeaderWorkerSet"


@dataclass(frozen=True)
class Workload:
    """The top of a pod's controller chain, e.g. `deployment/ml/llm-serve`, or why the
    pod has no serving workload (`why_not`)."""

    ref: str = ""
    chain: tuple[Mapping[str, Any], ...] = ()
    why_not: str = ""


def workload_of(view: ClusterView, pod: Mapping[str, Any], namespace: str) -> Workload:
    """The serving workload the pod belongs to, walking its controller references up."""
    controller = controller_of(pod)
    if controller is None:
        return Workload(why_not="it has no controller, so nothing would replace it")
    kind, name = controller[1], controller[2]
    if kind not in WORKLOAD_KINDS and kind != REPLICASETS.kind:
        return Workload(why_not=f"its controller is a {kind or 'controller of no kind'} "
                        "(training, a DaemonSet or another controller's pod), not a serving "
                        "workload")
    chain: list[Mapping[str, Any]] = []
    while True:
        found = _find(view, kind, namespace, name)
        if found is None:
            return Workload(why_not=f"its {kind} {namespace}/{name} is not in the cluster "
                            "state, so whether it is settled is unknown")
        chain.append(found)
        parent = controller_of(found)
        if kind == GROUP_KIND or (parent is not None and parent[1] == "Pod"):
            return Workload(why_not="it belongs to a LeaderWorkerSet group, which restarts "
                            "whole when one pod goes; groups are not moved")
        if parent is None or parent[1] not in WORKLOAD_KINDS:
            top = chain[-1]
            return Workload(f"{top.get('kind', kind).lower()}/{namespace}/{name_of(top)}",
                            tuple(chain))
        kind, name = parent[1], parent[2]


def unsettled_reason(workload: Workload, pods: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the workload is not settled, or None when it is; `pods` are the pods of its
    direct controller (the first object of the chain)."""
    for obj in workload.chain:
        reason = _object_unsettled(obj)
        if reason:
            return f"its {obj.get('kind')} {name_of(obj)} {reason}"
    for pod in pods:
        reason = pod_unsettled(pod)
        if reason:
            return f"its pod {name_of(pod)} {reason}"
    return None


def pod_unsettled(pod: Mapping[str, Any]) -> str | None:
    """Why one pod is not at rest (deleting, not Running, not Ready), or None."""
    if meta(pod).get("deletionTimestamp"):
        return "is being deleted"
    phase = status_of(pod).get("phase")
    if phase != "Running":
        return f"is {phase or 'of no phase'}, not Running"
    for condition in status_of(pod).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return None if condition.get("status") == "True" else "is not Ready"
    return "is not Ready"


def _find(view: ClusterView, kind: str, namespace: str, name: str
          ) -> Mapping[str, Any] | None:
    if kind == REPLICASETS.kind:
        for replicaset in view.objects_of(REPLICASETS.kind, namespace):
            if name_of(replicaset) == name:
                return replicaset
    return view.workload(kind, namespace, name)


def _object_unsettled(obj: Mapping[str, Any]) -> str | None:
    spec, status = spec_of(obj), status_of(obj)
    generation = meta(obj).get("generation")
    observed = status.get("observedGeneration")
    if isinstance(generation, int) and not (isinstance(observed, int) and observed >= generation):
        return (f"has not observed its latest spec (generation {generation}, observed "
                f"{observed if observed is not None else 'none'})")
    if spec.get("paused"):
        return "is paused"
    desired = replicas_of(obj)
    counts = [("replicas", status.get("replicas", 0)),
              ("readyReplicas", status.get("readyReplicas", 0))]
    if "updatedReplicas" in status:
        counts.append(("updatedReplicas", status["updatedReplicas"]))
    for field_name, count in counts:
        if count != desired:
            return f"has {field_name} {count}, not the {desired} its spec asks for"
    current, update = status.get("currentRevision"), status.get("updateRevision")
    if current and update and current != update:
        return f"is rolling out (revision {current} to {update})"
    return None
