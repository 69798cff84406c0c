"""A Deployment's scale-down predicted: the controller's split, then each ReplicaSet's syncs.

Sources: pkg/controller/deployment/sync.go (`scale`, see `deployment_sync`) and
util/deployment_util.go (see `deployment_util`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model.prediction import ScalePrediction, empty_prediction
from ..model.tie_group import TieGroup
from ..objects.kube import name_of, namespace_of, replicas_of, spec_of
from ..objects.ownership import owned_objects, owned_pod_facts
from ..objects.podfacts import PodFacts
from ..replicaset.prediction import invalid_cost_notes, selected_by_any, tag_replicaset
from ..replicaset.replicaset_sync import Deletion, deletions_of_facts
from ..view.cluster import ClusterView, candidate_pod_facts
from ..view.resource import REPLICASETS
from .deployment_sync import (
    after_saturation,
    not_yet_tied,
    replicaset_targets,
    rolling_step_groups,
    stale_race_groups,
    stale_saturation,
    tie_groups_over_sync_orders,
    two_step_group,
)
from .deployment_util import by_creation, find_new_replicaset


def predict_deployment(view: ClusterView, deployment: Mapping[str, Any], to_replicas: int,
                        now_ns: int | None, burst: int) -> ScalePrediction:
    prediction = empty_prediction(deployment, to_replicas)
    namespace = namespace_of(deployment)
    replicasets = owned_objects(view.objects_of(REPLICASETS.kind, namespace), deployment)
    split = replicaset_targets(deployment, replicasets, to_replicas, prediction.notes)
    all_pods = selected_by_any(view, namespace, replicasets)
    furthest = after_saturation(deployment, replicasets, split, to_replicas, all_pods,
                                now_ns, burst, prediction.notes)
    targets = after_saturation(deployment, replicasets, split, to_replicas, all_pods,
                               now_ns, burst, [], availability_steps=False)
    shrinking = [name for name, size in targets.items()
                 if size < replicas_of(_named(replicasets, name), default=0)]
    deletions: dict[str, Deletion] = {}
    two_step: list[TieGroup] = []
    for rs in by_creation(replicasets):
        rs_name = name_of(rs)
        current = replicas_of(rs, default=0)
        target = targets.get(rs_name, current)
        prediction.child_targets[rs_name] = (current, target)
        owned = _owned_by(view, namespace, rs, all_pods)
        deletion = deletions_of_facts(owned, all_pods, target, now_ns, burst)
        tag_replicaset(deletion.order, rs_name)
        deletions[rs_name] = deletion
        prediction.victims.extend(deletion.victims)
        prediction.survivors.extend(deletion.order[len(deletion.victims):])
        if target < split.get(rs_name, target) < current:
            two_step += two_step_group(owned, all_pods, split[rs_name], deletion, now_ns,
                                        burst)
        if shrinking == [rs_name] and len(targets) == 1:
            prediction.prefix_order = deletion.order
            prediction.prefix_chain = deletion.chain_bound
    prediction.tie_groups = tie_groups_over_sync_orders(deletions, all_pods, burst)
    prediction.tie_groups += not_yet_tied(two_step, prediction.tie_groups, prediction.victims)
    prediction.tie_groups += rolling_step_groups(deletions, targets, furthest,
                                                 prediction.tie_groups)
    if stale_saturation(deployment, replicasets, targets, to_replicas, all_pods, now_ns):
        _old_replicasets_may_go(prediction, deployment, replicasets, deletions, targets)
    prediction.notes.extend(invalid_cost_notes(prediction.victims + prediction.survivors))
    return prediction


def _old_replicasets_may_go(prediction: ScalePrediction, deployment: Mapping[str, Any],
                            replicasets: Sequence[Mapping[str, Any]],
                            deletions: Mapping[str, Deletion],
                            targets: Mapping[str, int]) -> None:
    """The race of `stale_saturation`: one outcome keeps the old ReplicaSets at their
    targets, the other scales them to 0, so all their pods are possible victims."""
    scaled = {**deployment, "spec": {**spec_of(deployment), "replicas": prediction.to_replicas}}
    new_name = name_of(find_new_replicaset(scaled, replicasets) or {})
    old = [name for name, size in targets.items() if name != new_name and size > 0]
    old_pods = [pod for name in old for pod in deletions[name].order]
    prediction.tie_groups = stale_race_groups(prediction.tie_groups, old_pods, new_name)
    prediction.notes.append(
        f"the new ReplicaSet {new_name} is not complete without the pods it deletes, but "
        f"its availableReplicas may still count them: if the "
        f"Deployment controller's next sync reads that count first, it scales "
        f"{', '.join(old)} to 0 (a race; the verdict assumes it does)")


def _owned_by(view: ClusterView, namespace: str, rs: Mapping[str, Any],
              all_pods: Sequence[PodFacts]) -> list[PodFacts]:
    """`owned_pod_facts(all_pods, rs)`, from the view's label index when it answers
    exactly for the ReplicaSet's selector (the same pods in the same namespace order,
    without matching every pod of the Deployment against it)."""
    pods, exact = candidate_pod_facts(view, namespace, [spec_of(rs).get("selector")])
    if exact:
        return owned_pod_facts(pods, rs, selector_checked=True)
    return owned_pod_facts(all_pods, rs)


def _named(objects: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    return next(obj for obj in objects if name_of(obj) == name)
