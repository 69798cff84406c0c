"""Victim prediction for a scale-down of a Deployment, ReplicaSet or StatefulSet.

Deployments: pkg/controller/deployment/sync.go (`scale`) and util/deployment_util.go.
StatefulSets: pkg/controller/statefulset/stateful_set_control.go.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from operator import attrgetter, is_not
from typing import Any

from .active_pods_with_ranks import RankedPod, TieGroup, possible_victims, ranked_pod
from .chain_bound import ChainBound
from .cluster import ClusterView, candidate_pod_facts, pod_facts
from .deletion_cost import go_quote
from .kube import (
    annotations_of,
    controller_ref,
    go_parse_int,
    labels_of,
    meta,
    name_of,
    namespace_of,
    parse_time_ns,
    replicas_of,
    spec_of,
    status_of,
    uid_of,
)
from .podfacts import PHASE_ORDINAL, PodFacts
from .replicaset_sync import BURST_REPLICAS, Deletion, deletions_of_facts
from .rollout import ShrinkingReplicaSet, sync_order_groups
from .selectors import compile_workload_selector, workload_selector_matches

MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
_STATEFUL_POD_NAME = re.compile(r"^(.*)-([0-9]+)\Z")
_DEFAULT_SURGE = "25%"
_INT32_MAX = 2**31 - 1


@dataclass
class ScalePrediction:
    """What the controllers will delete when a workload goes to `to_replicas`."""

    kind: str
    namespace: str
    name: str
    from_replicas: int
    to_replicas: int
    victims: list[RankedPod] = field(default_factory=list)
    survivors: list[RankedPod] = field(default_factory=list)
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
    raise ValueError(f"cannot predict a scale of kind {kind!r}")


def _empty_prediction(workload: Mapping[str, Any], to_replicas: int) -> ScalePrediction:
    return ScalePrediction(
        kind=workload.get("kind") or "",
        namespace=namespace_of(workload),
        name=name_of(workload),
        from_replicas=replicas_of(workload),
        to_replicas=to_replicas,
    )


# --- ownership -------------------------------------------------------------------------


def _is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """Controller reference points at `owner`."""
    return _same_controller(obj, {"uid": uid_of(owner), "kind": owner.get("kind"),
                                  "name": name_of(owner)})


def _controlled_by(facts: PodFacts, uid: str, name: str) -> bool:
    """The pod's controller is the StatefulSet (`_same_controller` on facts)."""
    controller = facts.controller
    if controller is None:
        return False
    if controller[0] and uid:
        return controller[0] == uid
    return controller[1] == "StatefulSet" and controller[2] == name


def owned_objects(candidates: Sequence[Mapping[str, Any]],
                  owner: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Objects the owner's controller claims: controlled by it, or orphans it would adopt.

    Mirrors ClaimPods/ClaimReplicaSets: either way the labels must match the selector.
    """
    selector = spec_of(owner).get("selector")
    owned = []
    for obj in candidates:
        if not workload_selector_matches(selector, labels_of(obj)):
            continue
        if _is_controlled_by(obj, owner) or (
            controller_ref(obj) is None and not meta(obj).get("deletionTimestamp")
        ):
            owned.append(obj)
    return owned


def owned_pod_facts(candidates: Sequence[PodFacts], owner: Mapping[str, Any],
                    selector_checked: bool = False) -> list[PodFacts]:
    """`owned_objects` for pods given as facts, the selector prepared once.

    `selector_checked`: every candidate is known to match the owner's selector.
    """
    uid, kind, name = uid_of(owner), owner.get("kind"), name_of(owner)
    exact = (uid, kind, name)  # what the controller's own pods carry: the common case

    def claimed(facts: PodFacts) -> bool:
        controller = facts.controller
        if controller is None:
            return not facts.deleting  # an orphan the controller would adopt
        if controller[0] and uid:
            return controller[0] == uid
        return controller[1] == kind and controller[2] == name

    if selector_checked:
        return [f for f in candidates if f.controller == exact or claimed(f)]
    matches = compile_workload_selector(spec_of(owner).get("selector"))
    return [f for f in candidates
            if matches(f.labels) and (f.controller == exact or claimed(f))]


def _claimed_and_related(view: ClusterView,
                         rs: Mapping[str, Any]) -> tuple[list[PodFacts], list[PodFacts]]:
    """The ReplicaSet's pods and its related pods, read through the view's index."""
    namespace = namespace_of(rs)
    ref = controller_ref(rs)
    own = candidate_pod_facts(view, namespace, [spec_of(rs).get("selector")])[0]
    if ref is None:
        return owned_pod_facts(own, rs), []
    siblings = [other for other in view.replicasets(namespace) if _same_controller(other, ref)]
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


def related_pods(view: ClusterView, replicaset: Mapping[str, Any]) -> list[PodFacts]:
    """Pods matched by every ReplicaSet sharing this one's controller (getIndirectlyRelatedPods)."""
    ref = controller_ref(replicaset)
    if ref is None:
        return []
    namespace = namespace_of(replicaset)
    siblings = [rs for rs in view.replicasets(namespace) if _same_controller(rs, ref)]
    return _selected_by_any(view, namespace, siblings)


def _same_controller(obj: Mapping[str, Any], ref: Mapping[str, Any]) -> bool:
    """`obj`'s controller is the one `ref` names: by UID when both have one, else by name."""
    other = controller_ref(obj)
    if other is None:
        return False
    if other.get("uid") and ref.get("uid"):
        return other["uid"] == ref["uid"]
    return other.get("kind") == ref.get("kind") and other.get("name") == ref.get("name")


def _pods_matching_any(pods: Sequence[PodFacts],
                       replicasets: Sequence[Mapping[str, Any]]) -> list[PodFacts]:
    matchers = [compile_workload_selector(spec_of(rs).get("selector")) for rs in replicasets]
    if len(matchers) == 1:
        [matches] = matchers
        return [pod for pod in pods if matches(pod.labels)]
    return [pod for pod in pods if any(matches(pod.labels) for matches in matchers)]


# --- ReplicaSet ------------------------------------------------------------------------


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
    targets = _after_saturation(deployment, replicasets, split, to_replicas, all_pods,
                                now_ns, burst, prediction.notes)
    shrinking = [name for name, size in targets.items()
                 if size < replicas_of(_named(replicasets, name), default=0)]
    deletions: dict[str, Deletion] = {}
    two_step: list[TieGroup] = []
    for rs in _by_creation(replicasets):
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
            two_step += _two_step_group(owned, all_pods, split[rs_name], deletion, now_ns,
                                        burst)
        if shrinking == [rs_name] and len(targets) == 1:
            prediction.prefix_order = deletion.order
            prediction.prefix_chain = deletion.chain_bound
    prediction.tie_groups = _tie_groups_over_sync_orders(deletions, all_pods, burst)
    prediction.tie_groups += _not_yet_tied(two_step, prediction.tie_groups, prediction.victims)
    prediction.notes.extend(invalid_cost_notes(prediction.victims + prediction.survivors))
    return prediction


def _owned_by(view: ClusterView, namespace: str, rs: Mapping[str, Any],
              all_pods: Sequence[PodFacts]) -> list[PodFacts]:
    """`owned_pod_facts(all_pods, rs)`, from the view's label index when it answers
    exactly for the ReplicaSet's selector (the same pods in the same namespace order,
    without matching every pod of the Deployment against it)."""
    pods, exact = candidate_pod_facts(view, namespace, [spec_of(rs).get("selector")])
    if exact:
        return owned_pod_facts(pods, rs, selector_checked=True)
    return owned_pod_facts(all_pods, rs)


def _after_saturation(deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]],
                      targets: dict[str, int], to_replicas: int,
                      all_pods: Sequence[PodFacts], now_ns: int | None,
                      burst: int, notes: list[str]) -> dict[str, int]:
    """The Deployment controller's next syncs after a proportional split, until stable.

    The split updates the ReplicaSets, which triggers another sync whose `scale()` looks
    again (found by the e2e differential run against the real controllers):
    - one ReplicaSet left with pods (FindActiveOrLatest) gets exactly the new count;
    - a new ReplicaSet left at exactly the new count whose kept pods are all available
      is saturated (IsSaturated: spec.replicas, desired-replicas and
      status.availableReplicas equal the Deployment's replicas) once the ReplicaSet
      controller has removed its victims: every old ReplicaSet goes to 0 (a rollout in
      progress does the same through reconcileOldReplicaSets).
    Either way more pods go in the same scale-down.
    """
    if len(targets) < 2:  # no proportional split: the first sync was final
        return targets
    scaled = {**deployment, "spec": {**spec_of(deployment), "replicas": to_replicas}}
    new_rs = find_new_replicaset(scaled, replicasets)
    for _ in range(len(targets)):
        with_pods = [name for name, size in targets.items() if size > 0]
        if len(with_pods) == 1 and targets[with_pods[0]] != to_replicas:
            notes.append(f"ReplicaSet {with_pods[0]} is then the only one with pods: the "
                         f"Deployment controller sets it to {to_replicas}")
            targets = {**targets, with_pods[0]: to_replicas}
        elif _saturated_after(new_rs, targets, to_replicas, all_pods, deployment, now_ns,
                              burst):
            assert new_rs is not None
            notes.append(f"the new ReplicaSet {name_of(new_rs)} is then complete (its "
                         f"{to_replicas} remaining pods are available): the Deployment "
                         "controller scales the old ReplicaSets to 0")
            targets = {name: 0 if name != name_of(new_rs) else size
                       for name, size in targets.items()}
        else:
            break
    return targets


def _two_step_group(pods: Sequence[PodFacts], all_pods: Sequence[PodFacts],
                    first: int, one_step: Deletion, now_ns: int | None,
                    burst: int) -> list[TieGroup]:
    """A ReplicaSet the Deployment controller sets to `first`, then to its final target,
    may sync once (final target, today's ranks) or twice (ranks recounted without the
    first victims): the pods on which the two outcomes differ are uncertain."""
    step = deletions_of_facts(pods, all_pods, first, now_ns, burst)
    gone = {p.name for p in step.victims}
    rest = deletions_of_facts([p for p in pods if p.name not in gone],
                              [p for p in all_pods if p.name not in gone],
                              len(one_step.order) - len(one_step.victims), now_ns, burst)
    two_steps = gone | {p.name for p in rest.victims}
    one = {p.name for p in one_step.victims}
    # The first sync's own ties decide which pods the second one re-ranks, and the
    # second sync's ties are as unknowable as any (rules 6-8 follow the controller's
    # clock: the e2e differential, seed 63, saw our clock pick the one-step victim).
    differ = (one ^ two_steps) | {p.name for g in step.tie_groups + rest.tie_groups
                                  for p in g.members}
    tied = {p.name for g in one_step.tie_groups for p in g.members}
    members = [p for p in one_step.order if p.name in differ and p.name not in tied]
    removed = sum(1 for p in members if p.name in one)
    if not removed or removed == len(members):
        return []
    return [TieGroup(members=members, removed=removed)]


def _saturated_after(new_rs: Mapping[str, Any] | None, targets: Mapping[str, int],
                     to_replicas: int, all_pods: Sequence[PodFacts],
                     deployment: Mapping[str, Any], now_ns: int | None, burst: int) -> bool:
    """The new ReplicaSet saturated once at its target, while old ones still have pods."""
    if new_rs is None or to_replicas == 0 or targets.get(name_of(new_rs)) != to_replicas:
        return False
    if not any(size > 0 for name, size in targets.items() if name != name_of(new_rs)):
        return False
    kept = deletions_of_facts(owned_pod_facts(all_pods, new_rs), all_pods, to_replicas,
                              now_ns, burst)
    survivors = kept.order[len(kept.victims):]
    min_ready_ns = int(spec_of(deployment).get("minReadySeconds") or 0) * 1_000_000_000
    return len(survivors) == to_replicas and all(
        _available(pod, min_ready_ns, now_ns) for pod in survivors)


def _available(pod: RankedPod, min_ready_ns: int, now_ns: int | None) -> bool:
    """IsPodAvailable: ready, and for at least minReadySeconds."""
    if not pod.ready:
        return False
    if min_ready_ns == 0:
        return True
    return (now_ns is not None and pod.ready_time_ns is not None
            and now_ns - pod.ready_time_ns >= min_ready_ns)


def _not_yet_tied(groups: list[TieGroup], tied: list[TieGroup],
                  victims: list[RankedPod]) -> list[TieGroup]:
    """`groups` without the pods already in a group of `tied` (one group per pod)."""
    seen = {id(p) for g in tied for p in g.members}
    victim_ids = {id(p) for p in victims}
    kept = []
    for group in groups:
        members = [p for p in group.members if id(p) not in seen]
        removed = sum(1 for p in members if id(p) in victim_ids)
        if 0 < removed < len(members):
            kept.append(TieGroup(members=members, removed=removed))
    return kept


def _tie_groups_over_sync_orders(deletions: Mapping[str, Deletion],
                                 all_pods: Sequence[Mapping[str, Any]],
                                 burst: int) -> list[TieGroup]:
    """The uncertain pods of each ReplicaSet, over every order their syncs can take.

    With one ReplicaSet deleting, no sibling deletion can change a rank and the tie
    groups of its own prediction say it all; with several, see `rollout`.
    """
    deleting = [name for name, d in deletions.items() if d.victims]
    if len(deleting) < 2:
        return [group for d in deletions.values() for group in d.tie_groups]
    groups = sync_order_groups(
        [ShrinkingReplicaSet(name, deletions[name].order, len(deletions[name].victims),
                             deletions[name].victims) for name in deleting],
        Counter(facts.node_name for facts in all_pods if facts.active), burst)
    return [group for group in groups.values() if group is not None]


def _named(objects: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    return next(obj for obj in objects if name_of(obj) == name)


def replicaset_targets(deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]],
                       to_replicas: int, notes: list[str] | None = None) -> dict[str, int]:
    """New spec.replicas per ReplicaSet after the Deployment controller's `scale()`."""
    notes = notes if notes is not None else []
    scaled = {**deployment, "spec": {**spec_of(deployment), "replicas": to_replicas}}
    new_rs = find_new_replicaset(scaled, replicasets)
    old = [rs for rs in replicasets if rs is not new_rs]
    active = [rs for rs in replicasets if replicas_of(rs, default=0) > 0]
    if not active:
        latest = new_rs or (_by_creation(old)[-1] if old else None)
        return {name_of(latest): to_replicas} if latest else {}
    if len(active) == 1:
        return {name_of(active[0]): to_replicas}
    if _is_saturated(scaled, new_rs):
        return {name_of(rs): 0 for rs in old if replicas_of(rs, default=0) > 0}
    if not _is_rolling_update(scaled):
        notes.append("a Recreate rollout is in progress: the rollout, not this scale, "
                     "decides which pods go")
        return {}
    notes.append(f"a rollout is in progress over {len(active)} ReplicaSets: the change is "
                 "split between them in proportion to their size")
    return _proportional_targets(scaled, active)


def _proportional_targets(deployment: Mapping[str, Any],
                          active: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    replicas = replicas_of(deployment)
    allowed = replicas + max_surge(deployment) if replicas > 0 else 0
    to_add = allowed - sum(replicas_of(rs, default=0) for rs in active)
    if to_add > 0:  # larger first; newer first among equals
        ordered = sorted(_by_creation(active, newest_first=True),
                         key=lambda rs: -replicas_of(rs, default=0))
    else:  # larger first; older first among equals
        ordered = sorted(_by_creation(active), key=lambda rs: -replicas_of(rs, default=0))
    sizes: dict[str, int] = {}
    added = 0
    for rs in ordered:
        current = replicas_of(rs, default=0)
        proportion = replicaset_proportion(rs, deployment, to_add, added) if to_add else 0
        sizes[name_of(rs)] = current + proportion
        added += proportion
    if ordered and to_add:
        first = name_of(ordered[0])
        sizes[first] = max(sizes[first] + to_add - added, 0)
    return sizes


def replicaset_proportion(rs: Mapping[str, Any], deployment: Mapping[str, Any], to_add: int,
                          added: int) -> int:
    """GetReplicaSetProportion: the change for `rs` when `to_add` replicas are spread."""
    current = replicas_of(rs, default=0)
    if current == 0 or to_add == 0 or to_add == added:
        return 0
    allowed = to_add - added
    fraction = replicaset_fraction(rs, deployment)
    # Never more than is left to add (scaling up) or to remove (scaling down).
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def replicaset_fraction(rs: Mapping[str, Any], deployment: Mapping[str, Any]) -> int:
    """getReplicaSetFraction, rounding half away from zero like Go's math.Round.

    `deployment` carries the new spec.replicas and the old status.replicas. The size
    before the scale is the RS's max-replicas annotation; a missing, unparsable or zero
    annotation falls back to status.replicas, and when that is 0 too the fraction is 0
    (nothing to be proportional to).
    """
    current = replicas_of(rs, default=0)
    replicas = replicas_of(deployment)
    if replicas == 0:
        return -current
    max_replicas = replicas + max_surge(deployment)
    before = _max_replicas_annotation(rs)
    if not before:
        before = int(status_of(deployment).get("replicas") or 0)
        if before == 0:
            return 0
    # Go multiplies two int32s (wrapping on overflow) before converting to float64.
    return round_half_away(_int32(current * max_replicas) / before) - current


def _int32(value: int) -> int:
    """`value` wrapped to a Go int32."""
    return (value + 2**31) % 2**32 - 2**31


def round_half_away(value: float) -> int:
    """Round to nearest, halves away from zero (Go's math.Round), unlike Python's round().

    Exact: floor(|x| + 0.5) would be wrong where the addition itself rounds, e.g. for
    0.49999999999999994 (Go gives 0) or odd integers above 2**52.
    """
    magnitude = abs(value)
    whole = math.floor(magnitude)
    if magnitude - whole >= 0.5:  # exact: x - floor(x) is representable
        whole += 1
    return whole if value >= 0 else -whole


def _max_replicas_annotation(rs: Mapping[str, Any]) -> int | None:
    return non_negative_int32_annotation(rs, MAX_REPLICAS_ANNOTATION)


def non_negative_int32_annotation(obj: Mapping[str, Any], key: str) -> int | None:
    """getNonNegativeInt32FromAnnotation: strconv.ParseUint(v, 10, 32) capped at MaxInt32.

    None when absent or invalid (no sign, no spaces, ASCII digits only).
    """
    number = go_parse_int(annotations_of(obj).get(key), 32, signed=False)
    return number if number is not None and number <= _INT32_MAX else None


def _is_rolling_update(deployment: Mapping[str, Any]) -> bool:
    strategy = spec_of(deployment).get("strategy") or {}
    return strategy.get("type", "RollingUpdate") == "RollingUpdate"


def max_surge(deployment: Mapping[str, Any]) -> int:
    """MaxSurge: maxSurge resolved against spec.replicas, percentages rounded up.

    An unparsable value makes ResolveFenceposts fail; MaxSurge ignores the error and
    gets 0, as upstream does ("Error caught by validation").
    """
    if not _is_rolling_update(deployment):
        return 0
    rolling = (spec_of(deployment).get("strategy") or {}).get("rollingUpdate") or {}
    try:
        surge, _ = resolve_fenceposts(rolling.get("maxSurge", _DEFAULT_SURGE),
                                      rolling.get("maxUnavailable", _DEFAULT_SURGE),
                                      replicas_of(deployment))
    except ValueError:
        return 0
    return surge


def resolve_fenceposts(max_surge_value: int | str | None, max_unavailable: int | str | None,
                       desired: int) -> tuple[int, int]:
    """ResolveFenceposts: (surge, unavailable); both 0 resolves unavailable to 1.

    None stands for an unset field (intstr.ValueOrDefault(nil, 0)); ValueError for a
    value Go's GetScaledValueFromIntOrPercent rejects.
    """
    surge = scaled_int_or_percent(max_surge_value, desired, True)
    unavailable = scaled_int_or_percent(max_unavailable, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def scaled_int_or_percent(value: int | str | None, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent; None counts as 0.

    A string must be "<int>%" (strconv.Atoi on what precedes one trailing "%");
    anything else raises ValueError, as Go returns an error.
    """
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        raise ValueError(f"invalid value for IntOrString: {text!r} is not a percentage")
    percent = go_parse_int(text[:-1])
    if percent is None:
        raise ValueError(f"invalid value for IntOrString: {text!r}")
    scaled = float(percent) * float(total) / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def find_new_replicaset(deployment: Mapping[str, Any],
                        replicasets: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """FindNewReplicaSet: the oldest ReplicaSet whose template equals the Deployment's."""
    template = _template_without_hash(spec_of(deployment).get("template"))
    for rs in _by_creation(replicasets):
        if _template_without_hash(spec_of(rs).get("template")) == template:
            return rs
    return None


def _template_without_hash(template: Mapping[str, Any] | None) -> Any:
    """The template minus the pod-template-hash label (EqualIgnoreHash), copied shallowly.

    Like apimachinery's semantic equality, an empty label map equals a missing one.
    """
    template = dict(template or {})
    metadata = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (metadata.get("labels") or {}).items()
              if k != POD_TEMPLATE_HASH_LABEL}
    metadata.pop("labels", None)
    if labels:
        metadata["labels"] = labels
    template["metadata"] = metadata
    return template


def _is_saturated(deployment: Mapping[str, Any], rs: Mapping[str, Any] | None) -> bool:
    if rs is None:
        return False
    # GetDesiredReplicasAnnotation: the same non-negative int32 parse as max-replicas.
    desired = non_negative_int32_annotation(rs, DESIRED_REPLICAS_ANNOTATION)
    if desired is None:
        return False
    replicas = replicas_of(deployment)
    return (replicas_of(rs, default=0) == replicas and desired == replicas
            and int(status_of(rs).get("availableReplicas") or 0) == replicas)


def _by_creation(objects: Sequence[Mapping[str, Any]],
                 newest_first: bool = False) -> list[Mapping[str, Any]]:
    """ReplicaSetsByCreationTimestamp: oldest first, name breaks ties."""
    ordered = sorted(objects, key=lambda o: (parse_time_ns(meta(o).get("creationTimestamp")) or 0,
                                             name_of(o)))
    return ordered[::-1] if newest_first else ordered


# --- StatefulSet -----------------------------------------------------------------------


def _predict_statefulset(view: ClusterView, sts: Mapping[str, Any],
                         to_replicas: int) -> ScalePrediction:
    prediction = _empty_prediction(sts, to_replicas)
    start = int((spec_of(sts).get("ordinals") or {}).get("start") or 0)
    members: dict[int, RankedPod] = {}
    sts_name, sts_uid = name_of(sts), uid_of(sts)
    for facts in pod_facts(view, namespace_of(sts)):
        ordinal = stateful_ordinal(facts.name, sts_name)
        if ordinal is not None and facts.active and _controlled_by(facts, sts_uid, sts_name):
            members[ordinal] = ranked_pod(facts, 0)
    in_range = range(start, start + to_replicas)
    descending = sorted(members, reverse=True)
    # Condemned pods (outside the range, also below a raised ordinals.start) go highest
    # ordinal first; the order goes on with the pods in range, as smaller scales take them.
    prediction.victims = [members[o] for o in descending if o not in in_range]
    prediction.survivors = [members[o] for o in descending if o in in_range]
    prediction.order = prediction.victims + prediction.survivors
    prediction.prefix_order = prediction.order
    ordered_ready = (spec_of(sts).get("podManagementPolicy") or "OrderedReady") == "OrderedReady"
    if ordered_ready and prediction.victims:
        prediction.notes.extend(_ordered_ready_notes(sts, members, in_range,
                                                     len(prediction.victims)))
    return prediction


def _ordered_ready_notes(sts: Mapping[str, Any], members: Mapping[int, RankedPod],
                         in_range: range, condemned: int) -> list[str]:
    """What OrderedReady (podManagementPolicy) does to this scale-down, in words."""
    notes = []
    blocking = [members[o].name for o in in_range
                if o in members and not _running_and_ready(members[o])]
    missing = [f"{name_of(sts)}-{o}" for o in in_range if o not in members]
    if blocking or missing:
        what = ", ".join(blocking[:5] + [f"{name} (missing)" for name in missing[:5]])
        notes.append(f"OrderedReady: nothing is deleted while a pod in the new range is not "
                     f"Running and Ready; waiting for {what}")
    if condemned > 1:
        notes.append("OrderedReady: pods are deleted one at a time, highest ordinal first")
    return notes


def _running_and_ready(pod: RankedPod) -> bool:
    return pod.phase_ordinal == PHASE_ORDINAL["Running"] and pod.ready


def stateful_ordinal(pod_name: str, set_name: str) -> int | None:
    """The ordinal of a StatefulSet pod name, or None when it is not one of `set_name`'s."""
    match = _STATEFUL_POD_NAME.match(pod_name)
    if not match or match.group(1) != set_name:
        return None
    # getParentNameAndOrdinal: strconv.ParseInt(ordinal, 10, 32); on error the ordinal is
    # -1 and the controller ignores the pod.
    return go_parse_int(match.group(2), 32)
