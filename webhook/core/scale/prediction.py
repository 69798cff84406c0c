"""Victim prediction for a scale-down of a Deployment, ReplicaSet, StatefulSet or Rollout.

ReplicaSets: pkg/controller/replicaset/replica_set.go (see `replicaset_sync`).
Deployments: pkg/controller/deployment/sync.go (`scale`, see `deployment_sync`) and
util/deployment_util.go (see `deployment_util`).
StatefulSets: pkg/controller/statefulset/stateful_set_control.go (see
`stateful_set_control`).
LeaderWorkerSets: sigs.k8s.io/lws pkg/controllers (see `leader_worker_set`).
Argo Rollouts `Rollout`s: github.com/argoproj/argo-rollouts (see `argo_rollout`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from operator import attrgetter, is_not
from typing import Any

from ..argorollouts.argo_rollout import predict_rollout
from ..cost.deletion_cost import go_quote
from ..deployment.deployment_sync import (
    after_saturation,
    not_yet_tied,
    replicaset_targets,
    rolling_step_groups,
    stale_race_groups,
    stale_saturation,
    tie_groups_over_sync_orders,
    two_step_group,
)
from ..deployment.deployment_util import by_creation, find_new_replicaset
from ..leaderworkerset.leader_worker_set import BLOCKED, REPLACED, VICTIM, LwsGroup, scale_groups
from ..objects.kube import (
    controller_ref,
    go_parse_int,
    name_of,
    namespace_of,
    replicas_of,
    spec_of,
)
from ..objects.ownership import (
    controller_of,
    identity_of,
    owned_objects,
    owned_pod_facts,
    points_at,
)
from ..objects.podfacts import PodFacts
from ..objects.selectors import compile_workload_selector
from ..replicaset.active_pods_with_ranks import RankedPod, TieGroup, possible_victims, ranked_pod
from ..replicaset.chain_bound import ChainBound
from ..replicaset.replicaset_sync import BURST_REPLICAS, Deletion, deletions_of_facts
from ..statefulset.stateful_set_control import Wait, condemned_fates, running_and_ready
from ..view.cluster import ClusterView, candidate_pod_facts, pod_facts

_STATEFUL_POD_NAME = re.compile(r"^(.*)-([0-9]+)\Z")


@dataclass
class Blocked:
    """A pod the scale-down removes only after the controller stops waiting (`wait`)."""

    pod: RankedPod
    wait: Wait

    @property
    def waiting_on(self) -> str:
        """The pod the controller waits on."""
        return self.wait.on


@dataclass
class ScalePrediction:
    """What the controllers will delete when a workload goes to `to_replicas`."""

    kind: str
    namespace: str
    name: str
    from_replicas: int
    to_replicas: int
    victims: list[RankedPod] = field(default_factory=list)  # deleted without waiting
    survivors: list[RankedPod] = field(default_factory=list)
    # Pods the scale-down deletes only once the controller stops waiting (StatefulSets
    # under OrderedReady); the end state loses them too, the stalled state keeps them.
    blocked: list[Blocked] = field(default_factory=list)
    tie_groups: list[TieGroup] = field(default_factory=list)
    order: list[RankedPod] | None = None
    replica_set_targets: dict[str, tuple[int, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # One order whose every prefix is the victim set of a smaller target, when that holds
    # (one ReplicaSet or StatefulSet shrinks; syncs replay identically up to a smaller
    # cut); None during a rollout, where the split between ReplicaSets moves.
    prefix_order: list[RankedPod] | None = None
    # Along `prefix_order`, what every chain of syncs can delete (scale-downs larger than
    # one sync); None for StatefulSets, which delete by ordinal.
    prefix_chain: ChainBound | None = None
    # LeaderWorkerSets: every group (leader and workers) with its fate, highest index first.
    groups: list[LwsGroup] | None = None
    pods_per_replica: int = 1  # a LeaderWorkerSet's group size

    @property
    def possible_victims(self) -> list[RankedPod]:
        """Survivors that might be removed instead of a predicted victim."""
        return possible_victims(self.victims, self.tie_groups)


def predict_scale(
    view: ClusterView,
    workload: Mapping[str, Any],
    to_replicas: int,
    now_ns: int | None,
    burst: int = BURST_REPLICAS,
) -> ScalePrediction:
    """Predict the victims of setting `workload`'s replicas to `to_replicas`."""
    if to_replicas < 0:
        raise ValueError(f"replicas must be 0 or more, got {to_replicas}")
    kind = workload.get("kind")
    if kind == "ReplicaSet":
        return _predict_replicaset(view, workload, to_replicas, now_ns, burst)
    if kind == "Deployment":
        return _predict_deployment(view, workload, to_replicas, now_ns, burst)
    if kind == "StatefulSet":
        return _predict_statefulset(view, workload, to_replicas)
    if kind == "LeaderWorkerSet":
        return _predict_leader_worker_set(view, workload, to_replicas)
    if kind == "Rollout":
        prediction = _empty_prediction(workload, to_replicas)
        predict_rollout(view, workload, to_replicas, now_ns, burst, into=prediction)
        prediction.notes.extend(invalid_cost_notes(prediction.victims + prediction.survivors))
        return prediction
    raise ValueError(f"cannot predict a scale of kind {kind!r}")


def _empty_prediction(workload: Mapping[str, Any], to_replicas: int) -> ScalePrediction:
    return ScalePrediction(
        kind=workload.get("kind") or "",
        namespace=namespace_of(workload),
        name=name_of(workload),
        from_replicas=replicas_of(workload),
        to_replicas=to_replicas,
    )


# --- ReplicaSet ------------------------------------------------------------------------


def _claimed_and_related(view: ClusterView,
                         rs: Mapping[str, Any]) -> tuple[list[PodFacts], list[PodFacts]]:
    """The ReplicaSet's pods and its related pods, read through the view's index."""
    namespace = namespace_of(rs)
    controller = controller_of(rs)
    own = candidate_pod_facts(view, namespace, [spec_of(rs).get("selector")])[0]
    if controller is None:
        return owned_pod_facts(own, rs), []
    siblings = [other for other in view.replicasets(namespace)
                if points_at(controller_of(other), controller)]
    related = _selected_by_any(view, namespace, siblings)
    only_itself = len(siblings) == 1 and (
        spec_of(siblings[0]).get("selector") == spec_of(rs).get("selector"))
    return owned_pod_facts(related if only_itself else own, rs, only_itself), related


def _selected_by_any(view: ClusterView, namespace: str,
                     replicasets: Sequence[Mapping[str, Any]]) -> list[PodFacts]:
    """The namespace's pods matched by any of the ReplicaSets' selectors, in namespace
    order (from the view's index where it has one)."""
    pods, exact = candidate_pod_facts(view, namespace, [spec_of(rs).get("selector")
                                                        for rs in replicasets])
    return list(pods) if exact else _pods_matching_any(pods, replicasets)


def _pods_matching_any(pods: Sequence[PodFacts],
                       replicasets: Sequence[Mapping[str, Any]]) -> list[PodFacts]:
    matchers = [compile_workload_selector(spec_of(rs).get("selector")) for rs in replicasets]
    if len(matchers) == 1:
        [matches] = matchers
        return [pod for pod in pods if matches(pod.labels)]
    return [pod for pod in pods if any(matches(pod.labels) for matches in matchers)]


def _predict_replicaset(view: ClusterView, rs: Mapping[str, Any], to_replicas: int,
                        now_ns: int | None, burst: int) -> ScalePrediction:
    prediction = _empty_prediction(rs, to_replicas)
    pods, related = _claimed_and_related(view, rs)
    deletion = deletions_of_facts(pods, related, to_replicas, now_ns, burst)
    _tag_replicaset(deletion.order, name_of(rs))
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


def _tag_replicaset(pods: list[RankedPod], replicaset: str) -> None:
    for pod in pods:
        pod.replica_set = replicaset


# --- Deployment ------------------------------------------------------------------------


def _predict_deployment(view: ClusterView, deployment: Mapping[str, Any], to_replicas: int,
                        now_ns: int | None, burst: int) -> ScalePrediction:
    prediction = _empty_prediction(deployment, to_replicas)
    namespace = namespace_of(deployment)
    replicasets = owned_objects(view.replicasets(namespace), deployment)
    split = replicaset_targets(deployment, replicasets, to_replicas, prediction.notes)
    all_pods = _selected_by_any(view, namespace, replicasets)
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
        prediction.replica_set_targets[rs_name] = (current, target)
        owned = _owned_by(view, namespace, rs, all_pods)
        deletion = deletions_of_facts(owned, all_pods, target, now_ns, burst)
        _tag_replicaset(deletion.order, rs_name)
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


# --- StatefulSet -----------------------------------------------------------------------


def _predict_statefulset(view: ClusterView, sts: Mapping[str, Any],
                         to_replicas: int) -> ScalePrediction:
    """Condemned pods go highest ordinal first; under OrderedReady some may wait
    (`stateful_set_control`): those are `blocked`, not victims."""
    prediction = _empty_prediction(sts, to_replicas)
    start = int((spec_of(sts).get("ordinals") or {}).get("start") or 0)
    everyone: dict[int, PodFacts] = {}  # what the controller sees, Failed pods too
    sts_name, identity = name_of(sts), identity_of(sts)
    for facts in pod_facts(view, namespace_of(sts)):
        ordinal = stateful_ordinal(facts.name, sts_name)
        if ordinal is not None and points_at(facts.controller, identity):
            everyone[ordinal] = facts
    members = {o: ranked_pod(facts, 0) for o, facts in everyone.items() if facts.active}
    in_range = range(start, start + to_replicas)
    ordered_ready = (spec_of(sts).get("podManagementPolicy") or "OrderedReady") == "OrderedReady"
    gone, waits = condemned_fates(everyone, in_range, sts_name, ordered_ready)
    descending = sorted(members, reverse=True)
    # The order goes on with the pods in range, as smaller scales take them.
    prediction.victims = [members[o] for o in gone if o in members]
    prediction.blocked = [Blocked(members[o], waits[o]) for o in descending if o in waits]
    prediction.survivors = [members[o] for o in descending if o in in_range]
    prediction.order = (prediction.victims + [b.pod for b in prediction.blocked]
                        + prediction.survivors)
    prediction.prefix_order = prediction.order
    condemned = len(prediction.victims) + len(prediction.blocked)
    if ordered_ready and condemned:
        prediction.notes.extend(_ordered_ready_notes(sts, members, in_range, condemned))
        stall = _stall_note(prediction.blocked)
        if stall:
            prediction.notes.append(stall)
    return prediction


def _ordered_ready_notes(sts: Mapping[str, Any], members: Mapping[int, RankedPod],
                         in_range: range, condemned: int) -> list[str]:
    """What OrderedReady (podManagementPolicy) does to this scale-down, in words."""
    notes = []
    blocking = [members[o].name for o in in_range
                if o in members and not running_and_ready(members[o])]
    missing = [f"{name_of(sts)}-{o}" for o in in_range if o not in members]
    if blocking or missing:
        what = ", ".join(blocking[:5] + [f"{name} (missing)" for name in missing[:5]])
        notes.append(f"OrderedReady: nothing is deleted while a pod in the new range is not "
                     f"Running and Ready; waiting for {what}")
    if condemned > 1:
        notes.append("OrderedReady: pods are deleted one at a time, highest ordinal first")
    return notes


def _stall_note(blocked: list[Blocked]) -> str | None:
    """The stall at a condemned pod, in words (a stall in the new range has its own note)."""
    if not blocked or blocked[0].wait.in_new_range:
        return None
    wait = blocked[0].wait
    names = ", ".join(b.pod.name for b in blocked[:5])
    more = f" and {len(blocked) - 5} more" if len(blocked) > 5 else ""
    return (f"OrderedReady: the scale-down stops at {wait.on} and waits, for as long as that "
            f"lasts ({wait.reason}); {names}{more} stay until then")


def stateful_ordinal(pod_name: str, set_name: str) -> int | None:
    """The ordinal of a StatefulSet pod name, or None when it is not one of `set_name`'s."""
    match = _STATEFUL_POD_NAME.match(pod_name)
    if not match or match.group(1) != set_name:
        return None
    # getParentNameAndOrdinal: strconv.ParseInt(ordinal, 10, 32); on error the ordinal is
    # -1 and the controller ignores the pod.
    return go_parse_int(match.group(2), 32)


# --- LeaderWorkerSet -------------------------------------------------------------------


def _predict_leader_worker_set(view: ClusterView, lws: Mapping[str, Any],
                               to_replicas: int) -> ScalePrediction:
    """Whole groups go, highest index first (`leader_worker_set`); the surge groups the
    controller keeps for now are `blocked`; the outdated groups a rolling update under way
    may recreate are possible victims, all of them gone in the worst case (one group of
    them with a reason). No prefix order: a smaller target removes whole groups, not a
    prefix of pods (`assessment` counts groups instead)."""
    prediction = _empty_prediction(lws, to_replicas)
    scale = scale_groups(view, lws, to_replicas)
    prediction.groups = scale.groups
    prediction.pods_per_replica = scale.size
    replaced: list[RankedPod] = []
    for group in scale.groups:
        if group.fate == VICTIM:
            prediction.victims.extend(group.pods)
        elif group.fate == BLOCKED and scale.wait is not None:
            prediction.blocked.extend(Blocked(pod, scale.wait) for pod in group.pods)
        else:
            prediction.survivors.extend(group.pods)
            if group.fate == REPLACED:
                replaced.extend(group.pods)
    if replaced:
        prediction.tie_groups = [TieGroup(replaced, len(replaced), why=(
            "its group is of an old revision: the rolling update under way may delete and "
            "recreate it (when depends on the readiness of the replacements)"))]
    prediction.order = (prediction.victims + [b.pod for b in prediction.blocked]
                        + prediction.survivors)
    prediction.notes.extend(scale.notes)
    return prediction
