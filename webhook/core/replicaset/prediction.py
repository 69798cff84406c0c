"""A ReplicaSet's scale-down predicted: its pods and related pods, then its syncs.

Source: pkg/controller/replicaset/replica_set.go (see `replicaset_sync`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from itertools import compress
from operator import attrgetter, is_not
from typing import Any

from ..model.prediction import ScalePrediction, empty_prediction
from ..model.ranked_pod import RankedPod
from ..objects.deletion_cost import go_quote
from ..objects.kube import controller_ref, name_of, namespace_of, spec_of
from ..objects.ownership import controller_of, owned_pod_facts, points_at
from ..objects.podfacts import PodFacts
from ..objects.selectors import compile_workload_selector
from ..view.cluster import ClusterView, candidate_pod_facts
from ..view.resource import REPLICASETS
from .replicaset_sync import deletions_of_facts


def predict_replicaset(view: ClusterView, rs: Mapping[str, Any], to_replicas: int,
                        now_ns: int | None, burst: int) -> ScalePrediction:
    prediction = empty_prediction(rs, to_replicas)
    pods, related = claimed_and_related(view, rs)
    deletion = deletions_of_facts(pods, related, to_replicas, now_ns, burst)
    tag_replicaset(deletion.order, name_of(rs))
    prediction.victims = deletion.victims
    prediction.survivors = deletion.order[len(deletion.victims):]
    prediction.tie_groups = deletion.tie_groups
    prediction.order = deletion.order
    prediction.prefix_order = deletion.order
    prediction.prefix_chain = deletion.chain_bound
    prediction.notes.extend(invalid_cost_notes(deletion.order))
    if controller_ref(rs) is not None:
        prediction.notes.append(
            f"ReplicaSet {name_of(rs)} is managed by {controller_ref(rs).get('kind')} "
            f"{controller_ref(rs).get('name')}, which will undo a direct scale"
        )
    return prediction


def claimed_and_related(view: ClusterView,
                         rs: Mapping[str, Any]) -> tuple[list[PodFacts], list[PodFacts]]:
    """The ReplicaSet's pods and its related pods, read through the view's index."""
    namespace = namespace_of(rs)
    controller = controller_of(rs)
    own = candidate_pod_facts(view, namespace, [spec_of(rs).get("selector")])[0]
    if controller is None:
        return owned_pod_facts(own, rs), []
    siblings = [other for other in view.objects_of(REPLICASETS.kind, namespace)
                if points_at(controller_of(other), controller)]
    related = selected_by_any(view, namespace, siblings)
    only_itself = len(siblings) == 1 and (
        spec_of(siblings[0]).get("selector") == spec_of(rs).get("selector"))
    return owned_pod_facts(related if only_itself else own, rs, only_itself), related


def selected_by_any(view: ClusterView, namespace: str,
                     replicasets: Sequence[Mapping[str, Any]]) -> list[PodFacts]:
    """The namespace's pods matched by any of the ReplicaSets' selectors, in namespace
    order (from the view's index where it has one)."""
    pods, exact = candidate_pod_facts(view, namespace, [spec_of(rs).get("selector")
                                                        for rs in replicasets])
    return list(pods) if exact else pods_matching_any(pods, replicasets)


def pods_matching_any(pods: Sequence[PodFacts],
                       replicasets: Sequence[Mapping[str, Any]]) -> list[PodFacts]:
    matchers = [compile_workload_selector(spec_of(rs).get("selector")) for rs in replicasets]
    if len(matchers) == 1:
        [matches] = matchers
        return [pod for pod in pods if matches(pod.labels)]
    return [pod for pod in pods if any(matches(pod.labels) for matches in matchers)]


def tag_replicaset(pods: list[RankedPod], replicaset: str) -> None:
    for pod in pods:
        pod.replica_set = replicaset


def invalid_cost_notes(pods: Sequence[RankedPod]) -> list[str]:
    """Name the pods whose deletion cost the API server would reject, with the raw value.

    Such values predate validation or were written around it; the ReplicaSet
    controller counts them as 0, which may not be what their author meant.
    """
    flagged = list(compress(pods, map(_IS_SET, map(_INVALID_COST, pods))))
    invalid = [f"{pod.name} ({go_quote(pod.facts.invalid_cost)})"
               for pod in sorted(flagged, key=_NAME)]
    if not invalid:
        return []
    shown = ", ".join(invalid[:5]) + (f" and {len(invalid) - 5} more" if len(invalid) > 5 else "")
    return [f"invalid deletion cost on {shown}; the ReplicaSet controller counts it as 0"]


_NAME = attrgetter("name")


_INVALID_COST = attrgetter("facts.invalid_cost")


_IS_SET = partial(is_not, None)  # x -> x is not None, in C
