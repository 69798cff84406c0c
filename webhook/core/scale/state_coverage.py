"""Whether a cluster state holds what a scale-down's judgement needs.

A prediction is only as good as the pods and nodes it was given. A state file cut short
(an output that was not appended, pods of another namespace left out, a hand-written
file) would otherwise be judged as if the missing pods did not exist: with no pods, no
pod is deleted and every scale-down looks safe. The workload's own status says how many
pods its controller counts, and every scheduled pod names its node; where the state
holds fewer pods, or not the nodes, the verdict cannot be trusted and is not given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..objects.kube import replicas_of
from ..replicaset.active_pods_with_ranks import RankedPod
from .prediction import ScalePrediction


def state_gaps(workload: Mapping[str, Any], prediction: ScalePrediction,
               node: Callable[[str], Mapping[str, Any] | None]) -> list[str]:
    """What the state lacks to judge `prediction`, in words; empty when nothing is missing.

    The pods the workload's controller reports (`status.replicas`, else `spec.replicas`;
    a LeaderWorkerSet counts groups of `size` pods) must all be in the state, and so must
    the node of every scheduled one.
    """
    pods = _pods_of(prediction)
    gaps = []
    reported, field = _reported_pods(workload, prediction.pods_per_replica)
    if reported > len(pods):
        gaps.append(f"the state holds {len(pods)} of the {reported} pods "
                    f"{prediction.kind} {prediction.namespace}/{prediction.name} reports "
                    f"({field})")
    missing: dict[str, list[str]] = {}
    for pod in pods:
        if pod.node_name and node(pod.node_name) is None:
            missing.setdefault(pod.node_name, []).append(pod.name)
    if missing:
        shown = "; ".join(f"{name} (pods {', '.join(sorted(names))})"
                          for name, names in sorted(missing.items()))
        noun = "node" if len(missing) == 1 else "nodes"
        gaps.append(f"the state has no {noun} {shown}, so their pools are unknown")
    return gaps


def _pods_of(prediction: ScalePrediction) -> list[RankedPod]:
    """Every active pod the prediction saw, once each."""
    seen: dict[str, RankedPod] = {}
    in_units = [pod for unit in prediction.units or [] for pod in unit.pods]
    for pod in [*prediction.victims, *(b.pod for b in prediction.blocked),
                *prediction.survivors, *in_units]:
        seen.setdefault(pod.name, pod)
    return list(seen.values())


def _reported_pods(workload: Mapping[str, Any], pods_per_replica: int) -> tuple[int, str]:
    """The pods the controller counts, and the field that says so."""
    status = workload.get("status")
    replicas = status.get("replicas") if isinstance(status, Mapping) else None
    field = "status.replicas"
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        replicas, field = replicas_of(workload), "spec.replicas"
    if pods_per_replica > 1:
        return replicas * pods_per_replica, f"{field} {replicas} groups of {pods_per_replica}"
    return replicas, f"{field} {replicas}"
