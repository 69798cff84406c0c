"""The victims of a CloneSet scale-down, as the core's `ScalePrediction`.

The CloneSet controller lists its pods by owner (pkg/controller/cloneset/
cloneset_controller.go, `getOwnedPods`: the pods whose ownerReferences carry its UID, then
`GetActiveAndInactivePods`: not Succeeded, Failed or deleting; `claimPods` releases those
its selector no longer matches; it adopts no orphans). `scale_sync` runs its scale syncs;
this module turns the outcome into the records the policy judges:

- victims: the pods the syncs delete without waiting;
- blocked: pods chosen but held, by their preDelete hook (PreparingDelete), by
  `deleteReadyLimit` until other pods are available, or specified while the CloneSet is
  below its count and `scaleStrategy.maxUnavailable` holds back the creations that come
  first; the end state loses them too;
- tie groups: pods that tie with the cut on every rule the controller reads (its
  `sort.Sort` is not stable and its list order is not ours), pods of one node that swap
  ranks unseen, ready specified pods competing for fewer `deleteReadyLimit` slots (the
  controller's list order decides), and, when the limit holds ready pods, the pods a later
  sync may take instead (availability, rule 3, changes as pods pass `minReadySeconds`).
  A tie's `removed` counts the members deleted without waiting; its held members go once
  the controller stops waiting.

The deletion cost counts (rule 4), as for a ReplicaSet; so does the node's rank (rule 5)
among the pods of the revision group being shrunk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model.blocked import Blocked, Wait
from ..model.prediction import ScalePrediction
from ..model.ranked_pod import RankedPod, ranked_pod
from ..model.tie_group import TieGroup
from ..objects.kube import name_of, namespace_of, replicas_of, spec_of
from ..objects.ownership import identity_of, points_at
from ..objects.podfacts import PodFacts
from ..objects.selectors import compile_workload_selector
from ..view.cluster import ClusterView, candidate_pod_facts
from .cloneset_pod import SPECIFIED_DELETE_LABEL, CloneSetPod
from .cloneset_spec import CloneSetSpec
from .scale_sync import HELD_BY_HOOK, HELD_BY_LIMIT, ScaleIn, Tie, scale_in

KIND = "CloneSet"
# Why a specified pod goes, by what specifies it: its fix undoes that (fix.py).
NAMED_TO_DELETE = "named in spec.scaleStrategy.podsToDelete"
LABELLED_TO_DELETE = f"labelled {SPECIFIED_DELETE_LABEL}"
NAMED_AND_LABELLED = f"{NAMED_TO_DELETE} and {LABELLED_TO_DELETE}"


def cloneset_pods(view: ClusterView, cloneset: Mapping[str, Any]) -> list[PodFacts]:
    """The CloneSet's active pods: controlled by it and matched by its selector."""
    namespace = namespace_of(cloneset)
    selector = spec_of(cloneset).get("selector")
    candidates, exact = candidate_pod_facts(view, namespace, [selector])
    matches = compile_workload_selector(selector)
    identity = identity_of(cloneset)
    return [facts for facts in candidates
            if facts.active and points_at(facts.controller, identity)
            and (exact or matches(facts.labels))]


def predict_cloneset(view: ClusterView, cloneset: Mapping[str, Any], to_replicas: int,
                     now_ns: int | None = None, burst: int = 0) -> ScalePrediction:
    """Predict the pods the CloneSet controller deletes when `cloneset` goes to `to_replicas`.

    The registry's predictor: `burst` plays no part, since a CloneSet deletes every pod a
    sync chooses at once (only `deleteReadyLimit`, read from its spec, holds some back).
    """
    if to_replicas < 0:
        raise ValueError(f"replicas must be 0 or more, got {to_replicas}")
    prediction = ScalePrediction(kind=KIND, namespace=namespace_of(cloneset),
                                 name=name_of(cloneset), from_replicas=replicas_of(cloneset),
                                 to_replicas=to_replicas)
    spec = CloneSetSpec.of(cloneset).scaled_to(to_replicas)
    pods = [CloneSetPod(facts) for facts in cloneset_pods(view, cloneset)]
    outcome = scale_in(spec, pods, now_ns)
    ranked = {id(pod): ranked_pod(pod.facts, 0) for pod in pods}
    held = {id(pod) for pod in outcome.held}
    deleted = {id(pod) for pod in outcome.deleted}
    prediction.victims = [ranked[id(p)] for p in outcome.deleted]
    prediction.blocked = [Blocked(ranked[id(p)], Wait(outcome.held_on.get(p.name, p.name),
                                                      outcome.held_reason[p.name]))
                          for p in outcome.held]
    prediction.survivors = [ranked[id(p)] for p in outcome.order
                            if id(p) not in deleted and id(p) not in held]
    prediction.order = [ranked[id(p)] for p in outcome.order]
    prediction.tie_groups = [_tie_group(tie, ranked) for tie in outcome.ties]
    waiting = _waiting_for_availability(spec, pods, outcome, now_ns)
    if waiting is not None:
        prediction.tie_groups.append(_tie_group(waiting, ranked))
    if _one_prefix_order(spec, pods, outcome):
        prediction.prefix_order = prediction.order
    prediction.reasons = _reasons(spec, outcome)
    prediction.notes.extend(outcome.notes)
    prediction.notes.extend(_notes(spec, outcome))
    return prediction


def _tie_group(tie: Tie, ranked: Mapping[int, RankedPod]) -> TieGroup:
    return TieGroup([ranked[id(p)] for p in tie.members], tie.removed, why=tie.why)


def _waiting_for_availability(spec: CloneSetSpec, pods: Sequence[CloneSetPod],
                              outcome: ScaleIn, now_ns: int | None) -> Tie | None:
    """When `deleteReadyLimit` holds ready pods the scale-in chose, the next syncs run as
    pods become available, and availability comes before the cost in the order: the held
    pods and the survivors not yet available may go instead of one another, once the
    controller stops waiting (none goes before: `removed` 0). A held specified pod goes
    whatever the order, so it is no such member."""
    limited = [p for p in outcome.held if outcome.held_reason[p.name] == HELD_BY_LIMIT
               and _specified_by(spec, p) is None]
    if not limited:
        return None
    held = {id(p) for p in outcome.held}
    deleted = {id(p) for p in outcome.deleted}
    pending = [p for p in pods if id(p) not in held and id(p) not in deleted
               and p.ready() and not p.available(spec.min_ready_seconds, now_ns)]
    return Tie(limited + pending, 0, why=HELD_BY_LIMIT)


def _one_prefix_order(spec: CloneSetSpec, pods: Sequence[CloneSetPod], outcome: ScaleIn) -> bool:
    """Whether smaller targets delete prefixes of this order: one revision group, nothing
    specified, preparing to delete or held, so that every target sorts the same pods once."""
    if outcome.held or any(p.specified_delete or p.name in spec.pods_to_delete
                           or p.lifecycle == "PreparingDelete" for p in pods):
        return False
    revisions = {p.of_revision(spec.update_revision) for p in pods}
    return len(revisions) <= 1 and spec.partition_value in (None, 0)


def _reasons(spec: CloneSetSpec, outcome: ScaleIn) -> dict[str, str]:
    """Why a victim goes, where the CloneSet's own rules chose it before the ranking did."""
    going = {id(p) for p in [*outcome.deleted, *outcome.held]}
    updated_survives = any(p.of_revision(spec.update_revision) for p in outcome.order
                           if id(p) not in going)
    reasons = {}
    for pod in [*outcome.deleted, *outcome.held]:
        specified = _specified_by(spec, pod)
        if specified:
            reasons[pod.name] = specified
        elif updated_survives and not pod.of_revision(spec.update_revision):
            reasons[pod.name] = ("of an old revision: the CloneSet scales in old revisions "
                                 "first")
    return reasons


def _specified_by(spec: CloneSetSpec, pod: CloneSetPod) -> str | None:
    """What specifies `pod` for deletion (the list, the label, both), None when nothing."""
    named = pod.name in spec.pods_to_delete
    if named and pod.specified_delete:
        return NAMED_AND_LABELLED
    if named:
        return NAMED_TO_DELETE
    return LABELLED_TO_DELETE if pod.specified_delete else None


def _notes(spec: CloneSetSpec, outcome: ScaleIn) -> list[str]:
    notes = []
    if spec.spread_constraints:
        notes.append("the template has topologySpreadConstraints: the CloneSet controller "
                     "then ranks pods by topology, which poolguard does not model; pods equal "
                     "on phase, readiness and deletion cost may go instead of one another")
    hooked = [p.name for p in outcome.held if outcome.held_reason[p.name] == HELD_BY_HOOK]
    if hooked:
        notes.append(f"PreparingDelete: {', '.join(hooked[:5])} stay until their preDelete "
                     "hook lets go, and nothing else is scaled in meanwhile")
    return notes
