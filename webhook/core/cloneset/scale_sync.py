"""A CloneSet's scale-in, sync by sync: `Scale` and `choosePodsToDelete`.

Source: github.com/openkruise/kruise v1.8.0, pkg/controller/cloneset/sync/cloneset_scale.go.
One sync (`Scale`) with pods beyond the target:

1. `getPlannedDeletedPods`: the pods specified to delete (the label
   `apps.kruise.io/specified-delete`, or named in `scaleStrategy.podsToDelete`) and those in
   lifecycle state PreparingDelete. `managePreparingDelete` returns PreparingDelete pods to
   service when the target has room for them (not under `markPodNotReady`).
2. `calculateDiffsWithExpectation` (see `expectation_diffs`).
3. pods to create come first (then nothing is deleted in this sync): `scaleUpLimit` of
   them, which `scaleStrategy.maxUnavailable` holds back while pods are unavailable. The
   next syncs see them (Pending, not available); while none may be created, nothing is
   deleted either, so the specified pods wait.
4. PreparingDelete pods are deleted, except those their preDelete hook still holds.
5. specified pods are deleted: every not-ready one, ready ones up to `deleteReadyLimit`,
   taken in the controller's list order, which the prediction cannot see: ready specified
   pods competing for fewer slots are tied.
6. scale-in, only when nothing is specified or preparing to delete: `choosePodsToDelete`
   takes `scaleDownNumOldRevision` pods (at most `scaleDownNum`) from the pods not of the
   update revision and the rest from the updated ones, each group sorted by `pod_sorter`
   with its own same-node ranks; of the chosen, not-ready pods go and ready ones up to
   `deleteReadyLimit`. A pod the preDelete hook holds is marked PreparingDelete instead.

Each step that changes something ends the sync; the next sync (the controller's next
reconcile) starts over on what is left. `scale_in` runs syncs until one changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..objects.podfacts import PodFacts
from .cloneset_pod import (
    LIFECYCLE_STATE_LABEL,
    PREPARING_DELETE,
    PREPARING_NORMAL,
    REVISION_LABEL,
    CloneSetPod,
)
from .cloneset_spec import CloneSetSpec
from .expectation_diffs import default_is_pod_update, expectation_diffs, is_specified_delete
from .pod_sorter import Key, same_node_ranks, sort_key

HELD_BY_HOOK = "its preDelete hook (a finalizer or label of spec.lifecycle.preDelete) holds it"
HELD_BY_LIMIT = ("updateStrategy.maxUnavailable: no more ready pods may go until others are "
                 "available (minReadySeconds)")
SPECIFIED_IN_LIST_ORDER = ("specified for deletion, as the others of its group are: which of "
                           "them the ready limit (updateStrategy.maxUnavailable) lets go first "
                           "follows the controller's list order")


@dataclass
class Tie:
    """Pods of which `removed` go without waiting, which ones not knowable (the
    prediction's TieGroup); held members go too once the controller stops waiting."""

    members: list[CloneSetPod]
    removed: int
    why: str | None = None


@dataclass
class Choice:
    """What one sort of one revision group chose: the order and the pods tied across the cut."""

    order: list[CloneSetPod]
    chosen: int
    ties: list[list[CloneSetPod]] = field(default_factory=list)


@dataclass
class ScaleIn:
    """The outcome of the syncs of a scale-in, in the controller's order.

    `deleted`: gone without waiting. `held`: marked PreparingDelete (or left so) and kept
    until their preDelete hook lets go, chosen but kept by `deleteReadyLimit` until
    other pods are available, or specified while `scaleStrategy.maxUnavailable` holds back
    the creations that come first; `held_reason` says which, per pod name, and `held_on`
    the pod it waits on where another pod's availability lets it go. `order`: every pod,
    deleted first, then held, then the rest as the last sort ranked them.
    """

    deleted: list[CloneSetPod] = field(default_factory=list)
    held: list[CloneSetPod] = field(default_factory=list)
    held_reason: dict[str, str] = field(default_factory=dict)
    held_on: dict[str, str] = field(default_factory=dict)  # the pod a held pod waits on
    order: list[CloneSetPod] = field(default_factory=list)
    ties: list[Tie] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def choose(pods: Sequence[CloneSetPod], diff: int, spec: CloneSetSpec,
           now_ns: int | None) -> Choice:
    """`choose` inside choosePodsToDelete: the first `diff` of `pods` sorted, with the ties."""
    if diff >= len(pods):
        return Choice(list(pods), len(pods))
    ranks, interchangeable = same_node_ranks(pods)
    if spec.spread_constraints:
        ranks, interchangeable = {}, []

    def key(pod: CloneSetPod) -> Key:
        return sort_key(pod, ranks.get(id(pod), 0), pod.available(spec.min_ready_seconds, now_ns))

    keys = {id(pod): key(pod) for pod in pods}
    order = sorted(pods, key=lambda p: (keys[id(p)], p.name))
    # What the prediction can see: rules 1-4 alone when the topology ranker decides rule 5
    # (not ported), else the whole key.
    visible = 5 if spec.spread_constraints else len(keys[id(order[0])])
    seen = {id(pod): keys[id(pod)][:visible] for pod in pods}
    tied = _uncertain(order, diff, seen, _possible_keys(interchangeable, keys, seen))
    return Choice(order, diff, [tied] if tied else [])


def _possible_keys(interchangeable: list[list[CloneSetPod]], keys: Mapping[int, Key],
                   seen: Mapping[int, Key]) -> dict[int, list[Key]]:
    """The keys a pod may have, by id: pods of one node that tie in the ranker's own sort
    and are equal apart from the rank swap ranks unseen, so each may have any of their
    keys; any other pod has its own."""
    possible: dict[int, list[Key]] = {}
    for members in interchangeable:
        by_rest: dict[Key, list[CloneSetPod]] = {}
        for pod in members:
            rest = keys[id(pod)]
            by_rest.setdefault(rest[:5] + rest[6:], []).append(pod)
        for group in by_rest.values():
            for pod in group:
                possible[id(pod)] = [seen[id(other)] for other in group]
    return possible


def _uncertain(order: list[CloneSetPod], diff: int, seen: Mapping[int, Key],
               possible: Mapping[int, list[Key]]) -> list[CloneSetPod]:
    """The pods that may be chosen or not, in `order`, whatever order the controller and
    the ranker take: empty when the choice is certain.

    Swapping ranks inside a group of interchangeable pods only permutes their keys, so the
    sorted keys, and the key at the cut (the `diff`-th), are the same however the ranks
    and ties fall. A pod may go when one of its possible keys is at most the cut's, and may
    stay when one is above it, or equal to it while the pods with that key outnumber the
    places left for them. Pods merely tied with a tied pod, but never able to reach the
    cut, are not named.
    """
    cut = seen[id(order[diff - 1])]
    below = sum(1 for pod in order if seen[id(pod)] < cut)
    at_cut = sum(1 for pod in order if seen[id(pod)] == cut)
    split_at_cut = diff - below < at_cut
    uncertain = []
    for pod in order:
        keys = possible.get(id(pod), [seen[id(pod)]])
        may_go = min(keys) <= cut
        may_stay = max(keys) > cut or (cut in keys and split_at_cut)
        if may_go and may_stay:
            uncertain.append(pod)
    return uncertain


@dataclass
class _Sync:
    deleted: list[CloneSetPod] = field(default_factory=list)
    hooked: list[CloneSetPod] = field(default_factory=list)  # marked PreparingDelete now
    kept_ready: list[CloneSetPod] = field(default_factory=list)  # over deleteReadyLimit
    returned: list[CloneSetPod] = field(default_factory=list)  # back from PreparingDelete
    order: list[CloneSetPod] = field(default_factory=list)
    ties: list[Tie] = field(default_factory=list)
    creates: bool = False
    created: int = 0  # pods created (scaleUpLimit), of which `created_old` current revision
    created_old: int = 0
    creation_held: str | None = None  # why none may be created, with what it waits on
    waits_on: str = ""


def one_sync(spec: CloneSetSpec, pods: Sequence[CloneSetPod], now_ns: int | None) -> _Sync:
    """One `Scale` call on the active pods `pods` (their lifecycle as it stands)."""
    result = _Sync()
    specified = [p for p in pods if is_specified_delete(spec, p)]
    pre_delete = [p for p in pods if p.lifecycle == PREPARING_DELETE]
    num_to_delete = len({id(p) for p in specified + pre_delete})
    if not spec.mark_pod_not_ready:
        room = spec.replicas - len(pods) + num_to_delete
        back = [p for p in pre_delete if not is_specified_delete(spec, p)][:max(room, 0)]
        if back:
            result.returned = back
            return result
    diffs = expectation_diffs(spec, pods, spec.current_revision, spec.update_revision,
                              default_is_pod_update(spec), now_ns)
    if diffs.scale_up_num > 0:
        result.creates = True
        result.created = diffs.scale_up_limit
        result.created_old = min(diffs.scale_up_num_old_revision, diffs.scale_up_limit)
        if not diffs.scale_up_limit:
            _creation_held(spec, pods, diffs.scale_up_num, now_ns, result)
        return result
    if pre_delete:
        _delete(spec, pre_delete, result)
        if result.deleted or result.hooked:
            return result
    pre_ids = {id(p) for p in pre_delete}
    named = [p for p in specified if id(p) not in pre_ids]
    if named:
        limit = diffs.delete_ready_limit
        can = []
        for pod in named:
            if not pod.ready():
                can.append(pod)
            elif limit > 0:
                can.append(pod)
                limit -= 1
            else:
                result.kept_ready.append(pod)
        ready = [pod for pod in named if pod.ready()]
        if result.kept_ready and len(ready) > len(result.kept_ready):
            result.ties.append(Tie(ready, len(ready) - len(result.kept_ready),
                                   why=SPECIFIED_IN_LIST_ORDER))
        _delete(spec, can, result)
        if result.deleted or result.hooked:
            return result
    if diffs.scale_down_num <= 0 or num_to_delete > 0:
        return result
    _scale_in(spec, pods, diffs.scale_down_num, diffs.scale_down_num_old_revision,
              diffs.delete_ready_limit, now_ns, result)
    return result


def _creation_held(spec: CloneSetSpec, pods: Sequence[CloneSetPod], missing: int,
                   now_ns: int | None, result: _Sync) -> None:
    """Why `scaleStrategy.maxUnavailable` lets no pod be created, and the first pod whose
    availability would let one be: the unavailable pods as `calculateDiffsWithExpectation`
    counts them (PreparingDelete, or not available and not specified)."""
    unavailable = sorted(p.name for p in pods if p.lifecycle == PREPARING_DELETE or (
        not is_specified_delete(spec, p) and not p.available(spec.min_ready_seconds, now_ns)))
    result.waits_on = unavailable[0] if unavailable else ""
    pods_word = "pod" if missing == 1 else "pods"
    result.creation_held = (
        f"the CloneSet creates {missing} {pods_word} before it deletes a specified one, and "
        f"scaleStrategy.maxUnavailable ({spec.scale_max_unavailable}) holds the creation back "
        f"while {len(unavailable)} of its pods {'is' if len(unavailable) == 1 else 'are'} "
        "unavailable")


def created_pods(count: int, old: int, spec: CloneSetSpec, first: int) -> list[CloneSetPod]:
    """The pods a sync creates as the next syncs see them: Pending, unscheduled, in
    lifecycle PreparingNormal, the first `old` of the current revision (NewVersionedPods);
    named `(created N)`, which no pod's name can be."""
    pods = []
    for index in range(count):
        revision = spec.current_revision if index < old else spec.update_revision
        pods.append(CloneSetPod(PodFacts({
            "metadata": {"name": f"(created {first + index})",
                         "labels": {REVISION_LABEL: revision,
                                    LIFECYCLE_STATE_LABEL: PREPARING_NORMAL}},
            "status": {"phase": "Pending"}})))
    return pods


def _scale_in(spec: CloneSetSpec, pods: Sequence[CloneSetPod], total: int, old: int,
              ready_limit: int, now_ns: int | None, result: _Sync) -> None:
    """choosePodsToDelete, then the deleteReadyLimit filter and deletePods."""
    updated = [p for p in pods if default_is_pod_update(spec)(p, spec.update_revision)]
    updated_ids = {id(p) for p in updated}
    not_updated = [p for p in pods if id(p) not in updated_ids]
    if old >= total:
        choices = [choose(not_updated, total, spec, now_ns)]
    elif old > 0:
        choices = [choose(not_updated, old, spec, now_ns),
                   choose(updated, total - old, spec, now_ns)]
    else:
        choices = [choose(updated, total, spec, now_ns)]
    preparing = [pod for c in choices for pod in c.order[:c.chosen]]
    result.order = preparing + [pod for c in choices for pod in c.order[c.chosen:]]
    for c in choices:
        for members in c.ties:
            chosen = {id(p) for p in c.order[:c.chosen]}
            removed = sum(1 for p in members if id(p) in chosen)
            result.ties.append(Tie(list(members), removed))
    can = []
    for pod in preparing:
        if not pod.ready():
            can.append(pod)
        elif ready_limit > 0:
            can.append(pod)
            ready_limit -= 1
        else:
            result.kept_ready.append(pod)
    if result.kept_ready:
        # Which ready pods the limit keeps follows the chosen order, itself uncertain
        # where ties are: any chosen ready pod may be among the kept.
        chosen_ready = [p for p in preparing if p.ready()]
        result.ties.append(Tie(chosen_ready, len(chosen_ready) - len(result.kept_ready),
                               why=HELD_BY_LIMIT))
    _delete(spec, can, result)


def _delete(spec: CloneSetSpec, pods: Sequence[CloneSetPod], result: _Sync) -> None:
    """deletePods: a pod the preDelete hook holds is marked PreparingDelete (when it is not
    already), any other is deleted."""
    for pod in pods:
        if spec.pre_delete is not None and spec.pre_delete.holds(pod):
            if pod.lifecycle != PREPARING_DELETE:
                result.hooked.append(pod)
            continue
        result.deleted.append(pod)


def scale_in(spec: CloneSetSpec, pods: Sequence[CloneSetPod], now_ns: int | None,
             max_syncs: int | None = None) -> ScaleIn:
    """The syncs of a scale-in from `pods` (the CloneSet's active pods) at the clock
    `now_ns`, until a sync changes nothing. The pods' lifecycle is changed in place where a
    sync marks them PreparingDelete or returns them to service: pass fresh records.

    The pods a sync creates take part in the next syncs (Pending), and leave the outcome
    afterwards: it names only `pods`.
    """
    outcome = ScaleIn()
    remaining = list(pods)
    kept: list[CloneSetPod] = []
    last_order: list[CloneSetPod] = []
    created = 0
    held_back: _Sync | None = None
    for _ in range(max_syncs or 4 * len(pods) + 8):
        step = one_sync(spec, remaining, now_ns)
        if step.order:
            last_order = step.order
        outcome.ties.extend(step.ties)
        kept = step.kept_ready
        for pod in step.returned:
            pod.lifecycle = PREPARING_NORMAL
        for pod in step.hooked:
            pod.lifecycle = PREPARING_DELETE
        if step.creates:
            if not step.created:
                held_back = step
                break
            remaining.extend(created_pods(step.created, step.created_old, spec, created + 1))
            created += step.created
            continue
        if not (step.deleted or step.hooked or step.returned):
            break
        gone = {id(p) for p in step.deleted}
        outcome.deleted.extend(step.deleted)
        remaining = [p for p in remaining if id(p) not in gone]
    if created:
        outcome.notes.append(
            f"the CloneSet controller creates {created} pod{'' if created == 1 else 's'} "
            "on the way (below its count, or a surge to replace specified pods); the "
            "prediction follows its syncs with them Pending")
    for pod in remaining:
        if pod.lifecycle == PREPARING_DELETE and (
                spec.pre_delete is not None and spec.pre_delete.holds(pod)):
            outcome.held.append(pod)
            outcome.held_reason[pod.name] = HELD_BY_HOOK
    held_ids = {id(p) for p in outcome.held}
    if held_back is not None and held_back.creation_held:
        # Held back below its count, it deletes the pods planned for deletion only later.
        for pod in remaining:
            if id(pod) not in held_ids and (is_specified_delete(spec, pod)
                                            or pod.lifecycle == PREPARING_DELETE):
                outcome.held.append(pod)
                outcome.held_reason[pod.name] = held_back.creation_held
                outcome.held_on[pod.name] = held_back.waits_on or pod.name
                held_ids.add(id(pod))
    for pod in kept:
        if id(pod) not in held_ids:
            outcome.held.append(pod)
            outcome.held_reason[pod.name] = HELD_BY_LIMIT
            held_ids.add(id(pod))
    placed = {id(p) for p in outcome.deleted} | held_ids
    rest = [p for p in remaining if id(p) not in placed]
    rest_order = [p for p in last_order if id(p) in {id(r) for r in rest}]
    if len(rest_order) != len(rest):
        rest_order = choose(rest, 0, spec, now_ns).order if rest else []
    outcome.order = outcome.deleted + outcome.held + rest_order
    return _without_created(outcome, pods) if created else _settled_ties(outcome)


def _without_created(outcome: ScaleIn, pods: Sequence[CloneSetPod]) -> ScaleIn:
    """The outcome with only the pods that exist now: the created ones left out."""
    real = set(map(id, pods))
    outcome.deleted = [p for p in outcome.deleted if id(p) in real]
    outcome.held = [p for p in outcome.held if id(p) in real]
    outcome.order = [p for p in outcome.order if id(p) in real]
    for tie in outcome.ties:
        tie.members = [p for p in tie.members if id(p) in real]
    outcome.ties = [tie for tie in outcome.ties if tie.members]
    return _settled_ties(outcome)


def _settled_ties(outcome: ScaleIn) -> ScaleIn:
    """Each tie's `removed` as the syncs ended: its members deleted without waiting (a
    later sync may take the members an earlier one kept; the held ones go once the
    controller stops waiting, which the verdict's end state counts)."""
    deleted = set(map(id, outcome.deleted))
    for tie in outcome.ties:
        tie.removed = sum(id(p) in deleted for p in tie.members)
    return outcome
