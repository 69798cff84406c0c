"""Whether a cluster state holds what a scale-down's judgement needs.

A prediction is only as good as the pods and nodes it was given. A state file cut short
(an output that was not appended, pods of another namespace left out, a hand-written
file) would otherwise be judged as if the missing pods did not exist: with no pods, no
pod is deleted and every scale-down looks safe. The workload's own status says how many
pods its controller counts, and every scheduled pod names its node; where the state
holds fewer pods, or not the nodes, the verdict cannot be trusted and is not given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..kinds.registry import BY_KIND, WORKLOAD_KINDS
from ..model.prediction import ScalePrediction
from ..model.ranked_pod import RankedPod
from ..objects.kube import controller_ref, labels_of, name_of, replicas_of, spec_of
from ..objects.selectors import selector_matches
from ..view.cluster import ClusterView
from ..view.resource import REPLICASETS


def state_gaps(view: ClusterView, workload: Mapping[str, Any],
               prediction: ScalePrediction) -> list[str]:
    """What the state lacks to judge `prediction`, in words; empty when nothing is missing.

    The pods the workload's controller reports (`status.replicas`, else `spec.replicas`;
    a LeaderWorkerSet counts groups of `size` pods) must all be in the state, and so must
    the node of every scheduled one. Where pods are missing because the state lacks the
    owner they name (the ReplicaSets of a Deployment), that owner is named first.
    """
    pods = _pods_of(prediction)
    gaps: list[str] = []
    node = view.node
    reported, field = _reported_pods(workload, prediction)
    if prediction.pods_not_created:
        reported -= prediction.pods_not_created
        field += (f", less {prediction.pods_not_created} workers not created until their "
                  "leaders are ready")
    if reported > len(pods):  # only then: the owners are looked for among all its pods
        gaps.extend(missing_owners(view, workload, prediction))
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


def missing_owners(view: ClusterView, workload: Mapping[str, Any],
                   prediction: ScalePrediction) -> list[str]:
    """The owners the state lacks that pods of `workload` name: pods its selector matches,
    not in the prediction, whose controller (a ReplicaSet, a workload) is not in the view.
    The pods are there; the prediction cannot reach them without their owner."""
    selector = spec_of(workload).get("selector")
    if not isinstance(selector, Mapping) or not selector:
        return []
    namespace = prediction.namespace
    seen = {pod.name for pod in _pods_of(prediction)}
    replicasets = {name_of(rs) for rs in view.objects_of(REPLICASETS.kind, namespace)}
    missing: dict[str, dict[str, int]] = {}  # pods by owner name, by owner kind
    for pod in view.pods(namespace):
        if name_of(pod) in seen or not selector_matches(selector, labels_of(pod)):
            continue
        owner = controller_ref(pod)
        kind, name = str((owner or {}).get("kind") or ""), str((owner or {}).get("name") or "")
        if kind == "ReplicaSet":
            known = name in replicasets
        elif kind in WORKLOAD_KINDS:
            known = view.workload(kind, namespace, name) is not None
        else:
            continue
        if not known:
            missing.setdefault(kind, {}).setdefault(name, 0)
            missing[kind][name] += 1
    gaps = []
    for kind, owners in sorted(missing.items()):
        names = " or ".join(f"{namespace}/{name}" for name in sorted(owners))
        pods = sum(owners.values())
        gaps.append(f"the state has no {kind} {names}, the owner{'s' if len(owners) > 1 else ''}"
                    f" of {pods} of its pods (the pods are in the state; add the {kind}s: "
                    f"kubectl get {kind.lower()}s -n {namespace} -o json)")
    return gaps


def _pods_of(prediction: ScalePrediction) -> list[RankedPod]:
    """Every active pod the prediction saw, once each."""
    seen: dict[str, RankedPod] = {}
    in_units = [pod for unit in prediction.units or [] for pod in unit.pods]
    for pod in [*prediction.victims, *(b.pod for b in prediction.blocked),
                *prediction.survivors, *in_units]:
        seen.setdefault(pod.name, pod)
    return list(seen.values())


def _reported_pods(workload: Mapping[str, Any],
                   prediction: ScalePrediction) -> tuple[int, str]:
    """The pods the controller counts, and the field that says so."""
    pods_per_replica = prediction.pods_per_replica
    status = workload.get("status")
    replicas = status.get("replicas") if isinstance(status, Mapping) else None
    field = "status.replicas"
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        replicas, field = replicas_of(workload), "spec.replicas"
    if pods_per_replica > 1:
        units = f"{BY_KIND[prediction.kind].unit}s"  # what a replica of several pods is called
        return replicas * pods_per_replica, f"{field} {replicas} {units} of {pods_per_replica}"
    return replicas, f"{field} {replicas}"
