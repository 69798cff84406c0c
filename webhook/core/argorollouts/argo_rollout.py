"""Victim prediction for a scale of an Argo Rollouts `Rollout` (argoproj.io/v1alpha1).

The Rollouts controller (github.com/argoproj/argo-rollouts v1.10, branch release-1.10)
sets its ReplicaSets' `spec.replicas`; each ReplicaSet controller then picks its victims
by the usual ranking (`replicaset_sync`), with the pods of every ReplicaSet of the
Rollout counted on a node (they share the controller), so deletion costs work as for a
Deployment. Which ReplicaSet gets which count is `argo_rollout_sync` (the syncs) over
`argo_rollout_counts` (the arithmetic). The ReplicaSets are found as the controller
finds them (rollout/replicaset.go `getReplicaSetsForRollouts`: ClaimReplicaSets on the
Rollout's selector), the new one by `status.currentPodHash` and the stable one by
`status.stableRS` against the `rollouts-pod-template-hash` label
(utils/replicaset/canary.go `GetStableRS`).

- At steady state (one ReplicaSet with replicas, the new one and the stable one) the
  new count goes to it, as a Deployment's does.
- Mid-rollout the syncs are replayed (canary: basic and traffic-routed with
  `dynamicStableScale`, `setCanaryScale`, `minPodsPerReplicaSet`; blue-green:
  `previewReplicaCount`, old ReplicaSets within `scaleDownDelaySeconds` following the
  new count). Where the code reads what timing decides every reading is replayed:
  ReplicaSet availability (the status may count the victims or not, new pods may come
  up or not: every order of those changes between syncs is explored), a deadline about
  to pass, an AnalysisRun. A ReplicaSet's predicted victims are those of the syncs with
  the availability the statuses show now; down to the most any reading deletes its
  pods are possible victims (the verdict takes the worst case).
- A current canary step that completes with the new count (its split reached with the
  canary pods available now, a pause with a duration, a route) sets the following steps
  going (`canary_steps`): the pods they may remove are possible victims too.
- What is not modelled (an update the controller has not recorded in the status, an
  aborted update's scale-down delay, the AWS target group check) makes every pod of
  every ReplicaSet with pods a possible victim, with a note that says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..deployment.deployment_sync import not_yet_tied, tie_groups_over_sync_orders, two_step_group
from ..model.ranked_pod import RankedPod
from ..model.tie_group import TieGroup
from ..objects.kube import (
    annotations_of,
    go_parse_int,
    labels_of,
    meta,
    name_of,
    namespace_of,
    parse_time_ns,
    replicas_of,
    spec_of,
    status_of,
)
from ..objects.ownership import owned_objects, owned_pod_facts
from ..objects.podfacts import PodFacts
from ..objects.selectors import compile_workload_selector
from ..replicaset.chain_bound import ChainBound
from ..replicaset.replicaset_sync import Deletion, deletions_of_facts
from ..view.cluster import ClusterView, candidate_pod_facts
from ..view.resource import REPLICASETS
from .argo_rollout_counts import abort_delay_set, canary_of, strategy, traffic_routed
from .argo_rollout_sync import (
    FUTURE,
    NEAR,
    PAST,
    Availability,
    Replay,
    Tracked,
    Variant,
    halted,
    post_promotion_wait,
    reachable_lowest,
    replay,
)
from .canary_steps import FollowingSteps, following_steps

HASH_LABEL = "rollouts-pod-template-hash"  # v1alpha1.DefaultRolloutUniqueLabelKey
REVISION_ANNOTATION = "rollout.argoproj.io/revision"
WORKLOAD_GENERATION_ANNOTATION = "rollout.argoproj.io/workload-generation"
DEADLINE_ANNOTATION = "scale-down-deadline"  # DefaultReplicaSetScaleDownDeadlineAnnotationKey
# A scale-down deadline closer than this may pass before the controller's sync runs.
NEAR_DEADLINE_NS = 10 * 1_000_000_000


class PredictionFields(Protocol):
    """What this module fills in of a `prediction.ScalePrediction`."""

    victims: list[RankedPod]
    survivors: list[RankedPod]
    tie_groups: list[TieGroup]
    child_targets: dict[str, tuple[int, int]]
    notes: list[str]
    prefix_order: list[RankedPod] | None
    prefix_chain: ChainBound | None


def predict_rollout(view: ClusterView, rollout: Mapping[str, Any], to_replicas: int,
                    now_ns: int | None, burst: int, into: PredictionFields) -> None:
    """Fill `into` with the victims of setting `rollout`'s replicas to `to_replicas`."""
    namespace = namespace_of(rollout)
    claimer = _with_selector(view, rollout, into.notes)
    replicasets = owned_objects(view.objects_of(REPLICASETS.kind, namespace), claimer)
    if not replicasets:
        return
    all_pods = _selected_by_any(view, namespace, replicasets)
    owned = {name_of(rs): owned_pod_facts(all_pods, rs) for rs in replicasets}
    states = [_tracked(rs, now_ns) for rs in replicasets]
    status = status_of(rollout)
    new_name = _by_hash(states, status.get("currentPodHash"))
    stable_name = _by_hash(states, status.get("stableRS"))
    scaled = {**rollout, "spec": {**spec_of(rollout), "replicas": to_replicas}}
    variants = _variants(rollout, states, new_name)
    replays = [replay(scaled, states, new_name, stable_name, v) for v in variants]
    kept = {rs.name: max(r.lowest[rs.name] for r in replays) for rs in states}
    fresh = _fresh_availability(owned, all_pods, rollout, now_ns, burst)
    least = _least(scaled, states, new_name, stable_name, variants, replays, fresh, into.notes)
    steps = following_steps(scaled, states, new_name, stable_name, variants, fresh)
    by_steps = {name for name, size in (steps.lowest if steps else {}).items()
                if size < least[name]}
    if steps is not None:
        least = {name: min(size, steps.lowest[name]) for name, size in least.items()}
        into.notes.append(_steps_note(scaled, steps, by_steps, least))
    deletions = _deletions(into, states, owned, all_pods, kept, now_ns, burst)
    into.tie_groups = tie_groups_over_sync_orders(deletions, all_pods, burst)
    into.tie_groups += not_yet_tied(
        [group for rs in states for step in _steps_above(rs, kept[rs.name], replays)
         for group in two_step_group(owned[rs.name], all_pods, step, deletions[rs.name],
                                     now_ns, burst)],
        into.tie_groups, into.victims)
    for name, deletion in deletions.items():
        if least[name] < kept[name]:
            why = (_why_steps(name, least[name], steps) if steps and name in by_steps
                   else _why_timing(name, least[name]))
            into.tie_groups = _widen(into.tie_groups, deletion, kept[name] - least[name], why)
    unmodelled = _unmodelled(rollout, states, new_name, stable_name)
    if unmodelled:
        _everything_possible(into, deletions, to_replicas, unmodelled)
    into.notes.extend(_notes(rollout, states, new_name, stable_name, replays, unmodelled))
    moving = replay(rollout, states, new_name, stable_name, variants[0]).lowest
    shrinking = [rs.name for rs in states if moving[rs.name] < rs.replicas]
    if shrinking:
        into.notes.append(f"the update is still moving: without this scale the Rollouts "
                          f"controller would shrink {', '.join(shrinking)} too; those "
                          "deletions are counted here")
    if not unmodelled and least == kept and _steady(states, new_name, stable_name) and (
            kept[new_name or ""] < _named(states, new_name).replicas):
        # A smaller count takes a longer prefix of the same order, as for a Deployment.
        only = deletions[new_name or ""]
        into.prefix_order = only.order
        into.prefix_chain = only.chain_bound


def _deletions(into: PredictionFields, states: Sequence[Tracked],
               owned: Mapping[str, list[PodFacts]], all_pods: list[PodFacts],
               kept: Mapping[str, int], now_ns: int | None,
               burst: int) -> dict[str, Deletion]:
    """Each ReplicaSet's deletions down to its size in `kept`, oldest ReplicaSet first,
    ranked with the pods of every ReplicaSet of the Rollout (`all_pods`)."""
    deletions: dict[str, Deletion] = {}
    for rs in sorted(states, key=lambda r: (r.created_ns, r.name)):
        deletion = deletions_of_facts(owned[rs.name], all_pods, kept[rs.name], now_ns, burst)
        for pod in deletion.order:
            pod.replica_set = rs.name
        deletions[rs.name] = deletion
        into.child_targets[rs.name] = (rs.replicas, kept[rs.name])
        into.victims.extend(deletion.victims)
        into.survivors.extend(deletion.order[len(deletion.victims):])
    return deletions


# --- the objects, as the controller reads them ------------------------------------------


def _with_selector(view: ClusterView, rollout: Mapping[str, Any],
                   notes: list[str]) -> Mapping[str, Any]:
    """The Rollout with the selector it claims ReplicaSets with: its own, or with a
    `workloadRef` and none, the referenced Deployment's (rollout/templateref.go
    `Resolve` fills it in memory)."""
    spec = spec_of(rollout)
    ref = spec.get("workloadRef")
    if not ref:
        return rollout
    notes.append(f"the pod template comes from {ref.get('kind')} {ref.get('name')} "
                 "(workloadRef): the ReplicaSets the Rollout owns are read, and the "
                 "referenced workload's own scale-down (workloadRef.scaleDown) is not "
                 "modelled")
    if spec.get("selector"):
        return rollout
    target = view.workload(str(ref.get("kind") or ""), namespace_of(rollout),
                           str(ref.get("name") or ""))
    selector = spec_of(target).get("selector") if target else None
    return {**rollout, "spec": {**spec, "selector": selector}}


def referenced_template(view: ClusterView, rollout: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod template of the workload the Rollout's `workloadRef` names, which the
    Rollouts controller takes when the Rollout has none (rollout/templateref.go); empty
    without a reference or its object."""
    ref = spec_of(rollout).get("workloadRef")
    if not isinstance(ref, Mapping):
        return {}
    target = view.workload(str(ref.get("kind") or ""), namespace_of(rollout),
                           str(ref.get("name") or ""))
    return spec_of(target).get("template") or {} if target else {}


def _selected_by_any(view: ClusterView, namespace: str,
                     replicasets: Sequence[Mapping[str, Any]]) -> list[PodFacts]:
    """The namespace's pods matched by any of the ReplicaSets' selectors."""
    selectors = [spec_of(rs).get("selector") for rs in replicasets]
    pods, exact = candidate_pod_facts(view, namespace, selectors)
    if exact:
        return list(pods)
    matchers = [compile_workload_selector(selector) for selector in selectors]
    return [pod for pod in pods if any(matches(pod.labels) for matches in matchers)]


def _tracked(rs: Mapping[str, Any], now_ns: int | None) -> Tracked:
    replicas = replicas_of(rs, default=0)
    return Tracked(
        name=name_of(rs), pod_hash=labels_of(rs).get(HASH_LABEL) or "", replicas=replicas,
        available=int(status_of(rs).get("availableReplicas") or 0),
        revision=annotations_of(rs).get(REVISION_ANNOTATION) or "",
        created_ns=parse_time_ns(meta(rs).get("creationTimestamp")) or 0,
        deadline=_deadline(annotations_of(rs).get(DEADLINE_ANNOTATION), now_ns),
        lowest=replicas)


def _deadline(value: str | None, now_ns: int | None) -> str | None:
    """The scale-down deadline as the controller's next sync reads it. Unparsable
    counts as passed (scaleDownDelayHelper logs it and scales to 0)."""
    if not value:
        return None
    try:
        deadline = parse_time_ns(value)
    except ValueError:
        return PAST
    if now_ns is None or deadline is None:
        return NEAR
    if deadline <= now_ns:
        return PAST
    return NEAR if deadline - now_ns < NEAR_DEADLINE_NS else FUTURE


def _named(states: Sequence[Tracked], name: str | None) -> Tracked:
    return next(rs for rs in states if rs.name == name)


def _by_hash(states: Sequence[Tracked], pod_hash: str | None) -> str | None:
    if not pod_hash:
        return None
    return next((rs.name for rs in states if rs.pod_hash == pod_hash), None)


def _fresh_availability(owned: Mapping[str, list[PodFacts]], all_pods: list[PodFacts],
                        rollout: Mapping[str, Any], now_ns: int | None,
                        burst: int) -> Availability:
    """The available pods a ReplicaSet keeps at a size (its status once the victims
    went): ready, and for `spec.minReadySeconds` (copied to the ReplicaSets)."""
    min_ready_ns = int(spec_of(rollout).get("minReadySeconds") or 0) * 1_000_000_000
    cache: dict[tuple[str, int], int] = {}

    def available(name: str, size: int) -> int:
        if (name, size) not in cache:
            kept = deletions_of_facts(owned[name], all_pods, size, now_ns, burst)
            cache[(name, size)] = sum(
                1 for pod in kept.order[len(kept.victims):]
                if pod.ready and (min_ready_ns == 0 or (
                    now_ns is not None and pod.ready_time_ns is not None
                    and now_ns - pod.ready_time_ns >= min_ready_ns)))
        return cache[(name, size)]
    return available


# --- readings of what timing decides -----------------------------------------------------


def _variants(rollout: Mapping[str, Any], states: Sequence[Tracked],
              new_name: str | None) -> list[Variant]:
    """The readings worth replaying: deadlines only when one is near, the analysis only
    when old ReplicaSets wait on it."""
    near = [False, True] if any(rs.deadline == NEAR for rs in states) else [False]
    new = next((rs for rs in states if rs.name == new_name), None)
    analysis = [False, True] if post_promotion_wait(rollout, new) else [True]
    return [Variant(d, a) for d in near for a in analysis]


def _least(rollout: Mapping[str, Any], states: Sequence[Tracked], new_name: str | None,
           stable_name: str | None, variants: Sequence[Variant], replays: Sequence[Replay],
           fresh: Availability, notes: list[str]) -> dict[str, int]:
    """Each ReplicaSet's lowest size over every reading. Availability matters to the
    canary arithmetic only (blue-green reads none): every order of availability
    updates is explored; past the search's bound, every ReplicaSet may go to 0."""
    least = {rs.name: min(r.lowest[rs.name] for r in replays) for rs in states}
    if strategy(rollout, "canary") is None:
        return least
    for variant in variants:
        found = reachable_lowest(rollout, states, new_name, stable_name, variant, fresh)
        if found is None:
            notes.append("too many orders of the ReplicaSets' availability updates to "
                         "explore: every pod of the Rollout may go")
            return {rs.name: 0 for rs in states}
        least = {name: min(size, found[name]) for name, size in least.items()}
    return least


def _steps_above(rs: Tracked, kept: int, replays: Sequence[Replay]) -> list[int]:
    """Sizes `rs` is set to on its way down to `kept`: its ReplicaSet controller may
    delete down to each of them first, then rank again what is left."""
    return sorted({size for r in replays for size in r.steps[rs.name]
                   if kept < size < rs.replicas}, reverse=True)


def _why_timing(name: str, least: int) -> str:
    return (f"the Rollouts controller may take {name} down to {least}, depending on the "
            "ReplicaSets' availability when it syncs (victims gone or not, new pods up or "
            "not), on a scale-down deadline about to pass, or on an analysis it waits for")


def _why_steps(name: str, least: int, steps: FollowingSteps) -> str:
    return (f"canary step {steps.completed} completes with the new count ({steps.how}), and "
            f"the steps the Rollouts controller then goes on with may take {name} down to "
            f"{least} (how far and when depends on the canary pods' availability)")


def _steps_note(rollout: Mapping[str, Any], steps: FollowingSteps, lowered: set[str],
                least: Mapping[str, int]) -> str:
    followed = (f"steps {steps.followed[0]}-{steps.followed[-1]}" if len(steps.followed) > 1
                else f"step {steps.followed[0]}" if steps.followed else "no further step")
    taken = ", ".join(f"{name} down to {least[name]}" for name in sorted(lowered))
    return (f"canary step {steps.completed} of Rollout {name_of(rollout)} completes with "
            f"the new count ({steps.how}): the Rollouts controller goes on with {followed}, "
            f"up to {steps.stop}"
            + (f"; they may take {taken}: those pods are possible victims" if taken
               else "; they delete no more pods"))


def _widen(groups: list[TieGroup], deletion: Deletion, extra: int, why: str) -> list[TieGroup]:
    """The ReplicaSet's tie groups and survivors as one group, `extra` more going: a
    reading that deletes more takes them from the same ranking, so any survivor or
    tied pod may be among them (one group per pod)."""
    mine_ids = {id(p) for p in deletion.order}
    mine = [g for g in groups if any(id(p) in mine_ids for p in g.members)]
    rest = [g for g in groups if not any(id(p) in mine_ids for p in g.members)]
    members: list[RankedPod] = []
    seen: set[int] = set()
    for pod in [p for g in mine for p in g.members] + deletion.order[len(deletion.victims):]:
        if id(pod) not in seen:
            seen.add(id(pod))
            members.append(pod)
    removed = min(len(members), sum(g.removed for g in mine) + extra)
    if not members or not removed:
        return groups
    return [*rest, TieGroup(members=members, removed=removed, why=why)]


def _unmodelled(rollout: Mapping[str, Any], states: Sequence[Tracked], new_name: str | None,
                stable_name: str | None) -> list[str]:
    """Why the controller's next syncs are not predictable from the objects."""
    reasons = []
    status = status_of(rollout)
    if new_name is None:
        reasons.append("no ReplicaSet carries status.currentPodHash (the controller has "
                       "not recorded its new ReplicaSet yet)")
    # calculateBaseStatus writes strconv.Itoa(generation); older controllers wrote a hash,
    # which says nothing about the generation.
    observed = go_parse_int(str(status.get("observedGeneration") or ""))
    generation = meta(rollout).get("generation")
    if observed is not None and generation is not None and observed != int(generation):
        reasons.append(f"the controller has not seen the Rollout's latest change yet "
                       f"(observedGeneration {observed}, generation {generation})")
    # persistRolloutStatus copies the workload-generation annotation (the referenced
    # workload's generation, set when its template changes) to the status once seen.
    seen = go_parse_int(str(status.get("workloadObservedGeneration") or ""))
    wanted = go_parse_int(annotations_of(rollout).get(WORKLOAD_GENERATION_ANNOTATION) or "")
    if spec_of(rollout).get("workloadRef") and None not in (seen, wanted) and seen != wanted:
        reasons.append(f"the controller has not seen the referenced workload's latest "
                       f"template yet (generation {wanted}, observed {seen})")
    if status.get("abort") and stable_name is not None and (
            strategy(rollout, "blueGreen") is not None or traffic_routed(rollout)
    ) and abort_delay_set(rollout)[0] and not (canary_of(rollout).get("dynamicStableScale")
                                               and not abort_delay_set(rollout)[1]):
        reasons.append("the update was aborted and the new ReplicaSet's scale-down waits "
                       "for abortScaleDownDelaySeconds")
    alb = (canary_of(rollout).get("trafficRouting") or {}).get("alb")
    if alb and any(rs.replicas > 0 and rs.deadline is None and rs.name not in (
            new_name, stable_name) for rs in states):
        reasons.append("old ReplicaSets wait for the AWS target group check (ALB)")
    return reasons


def _everything_possible(into: PredictionFields, deletions: Mapping[str, Deletion],
                         to_replicas: int, reasons: list[str]) -> None:
    """One group of every pod of every ReplicaSet with pods: which go is unknown."""
    members = [p for d in deletions.values() if d.order for p in d.order]
    removed = min(len(members), max(len(into.victims), len(members) - to_replicas))
    if not removed:
        return
    into.tie_groups = [TieGroup(
        members=members, removed=removed,
        why="the Rollouts controller's next syncs are not modelled here: "
            + "; ".join(reasons))]


def _steady(states: Sequence[Tracked], new_name: str | None, stable_name: str | None) -> bool:
    """One ReplicaSet with replicas, the new and stable one, all its pods available."""
    if new_name is None or new_name != stable_name:
        return False
    return all(rs.replicas == 0 for rs in states if rs.name != new_name) and all(
        rs.available >= rs.replicas for rs in states if rs.name == new_name)


def _notes(rollout: Mapping[str, Any], states: Sequence[Tracked], new_name: str | None,
           stable_name: str | None, replays: Sequence[Replay],
           unmodelled: list[str]) -> list[str]:
    notes = [f"not modelled: {reason}; every pod of its ReplicaSets with pods may go"
             for reason in unmodelled]
    stop = halted(rollout)
    if stop:
        notes.append(f"{stop}: the controller scales no ReplicaSet until it resumes; the "
                     "prediction is what it does then, from today's state")
    first = replays[0]
    for name, low in sorted(first.lowest.items()):
        if low < first.final[name] and low < _named(states, name).replicas:
            notes.append(f"the Rollouts controller takes {name} down to {low} before it "
                         f"scales it back up to {first.final[name]}: the pods above {low} "
                         "go, and new ones replace them")
    with_pods = [rs for rs in states if rs.replicas > 0]
    if len(with_pods) > 1 or (with_pods and with_pods[0].name != new_name):
        split = ", ".join(f"{name} {size}" for name, size in sorted(replays[0].final.items())
                          if size or any(rs.name == name and rs.replicas for rs in states))
        roles = f"new {new_name or '<none>'}, stable {stable_name or '<none>'}"
        notes.append(f"an update is in progress ({roles}): the Rollouts controller splits "
                     f"the new count as {split}")
    return notes

