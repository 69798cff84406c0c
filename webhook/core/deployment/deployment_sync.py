"""The Deployment controller's syncs for a scale: how the change splits between its
ReplicaSets, and the syncs that follow the split.

Source: pkg/controller/deployment/sync.go (`scale`, `isScalingEvent`) with the helpers
of `deployment_util`. The split updates the ReplicaSets, and each update triggers
another sync of the Deployment, which may move the targets again (`after_saturation`).
Which pods each ReplicaSet then deletes is `replicaset_sync`; where several shrink at
once, `rollout` bounds every order of their syncs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..model.ranked_pod import RankedPod
from ..model.tie_group import TieGroup
from ..objects.kube import name_of, replicas_of, spec_of, status_of
from ..objects.ownership import owned_pod_facts
from ..objects.podfacts import PodFacts
from ..replicaset.replicaset_sync import Deletion, deletions_of_facts
from .deployment_util import (
    by_creation,
    find_new_replicaset,
    is_rolling_update,
    is_saturated,
    max_surge,
    max_unavailable,
    replicaset_proportion,
)
from .sync_orders import ShrinkingReplicaSet, sync_order_groups


def replicaset_targets(deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]],
                       to_replicas: int, notes: list[str] | None = None) -> dict[str, int]:
    """New spec.replicas per ReplicaSet after the Deployment controller's `scale()`."""
    notes = notes if notes is not None else []
    scaled = {**deployment, "spec": {**spec_of(deployment), "replicas": to_replicas}}
    new_rs = find_new_replicaset(scaled, replicasets)
    old = [rs for rs in replicasets if rs is not new_rs]
    active = [rs for rs in replicasets if replicas_of(rs, default=0) > 0]
    if not active:
        latest = new_rs or (by_creation(old)[-1] if old else None)
        return {name_of(latest): to_replicas} if latest else {}
    if len(active) == 1:
        return {name_of(active[0]): to_replicas}
    if is_saturated(scaled, new_rs):
        return {name_of(rs): 0 for rs in old if replicas_of(rs, default=0) > 0}
    if not is_rolling_update(scaled):
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
        ordered = sorted(by_creation(active, newest_first=True),
                         key=lambda rs: -replicas_of(rs, default=0))
    else:  # larger first; older first among equals
        ordered = sorted(by_creation(active), key=lambda rs: -replicas_of(rs, default=0))
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


def after_saturation(deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]],
                      targets: dict[str, int], to_replicas: int,
                      all_pods: Sequence[PodFacts], now_ns: int | None,
                      burst: int, notes: list[str],
                      availability_steps: bool = True) -> dict[str, int]:
    """The Deployment controller's next syncs after a proportional split, until stable.

    The split updates the ReplicaSets, which triggers another sync whose `scale()` looks
    again:
    - one ReplicaSet left with pods (FindActiveOrLatest) gets exactly the new count;
    - a new ReplicaSet left at exactly the new count whose kept pods are all available
      is saturated (IsSaturated: spec.replicas, desired-replicas and
      status.availableReplicas equal the Deployment's replicas) once the ReplicaSet
      controller has removed its victims: every old ReplicaSet goes to 0 (a rollout in
      progress does the same through reconcileOldReplicaSets).
    - unpaused, rolling.go `rolloutRolling` first runs `reconcileNewReplicaSet`, which
      scales a new ReplicaSet above the new count down to exactly that count.
    Either way more pods go in the same scale-down. The answer is each ReplicaSet's
    lowest size on the way: a later scale-up creates pods, it brings none back.
    With `availability_steps` false the steps of `_rolling_step` are left out: they
    count availability that the controller reads from ReplicaSet statuses, which may
    not yet show the victims gone, so how far they go depends on timing.
    """
    if len(targets) < 2:  # no proportional split: the first sync was final
        return targets
    scaled = {**deployment, "spec": {**spec_of(deployment), "replicas": to_replicas}}
    new_rs = find_new_replicaset(scaled, replicasets)
    rolling = (is_rolling_update(scaled) and not spec_of(deployment).get("paused")
               and _stalled(deployment, replicasets, all_pods, now_ns, burst))
    lowest = dict(targets)
    for _ in range(2 * len(targets) + 2):
        lowest = {name: min(size, targets[name]) for name, size in lowest.items()}
        with_pods = [name for name, size in targets.items() if size > 0]
        new_name = name_of(new_rs) if new_rs is not None else None
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
        elif rolling and new_name is not None and targets.get(new_name, 0) > to_replicas:
            notes.append(f"the rollout then scales the new ReplicaSet {new_name} down to "
                         f"{to_replicas}")
            targets = {**targets, new_name: to_replicas}
        elif availability_steps and rolling and new_rs is not None and (rolled := _rolling_step(
                scaled, new_rs, replicasets, targets, all_pods, now_ns, burst)) != targets:
            if rolled.get(name_of(new_rs), 0) <= targets.get(name_of(new_rs), 0):
                notes.append("the rollout then scales old ReplicaSets down as far as "
                             "maxUnavailable allows: " + ", ".join(
                                 f"{name} to {size}" for name, size in rolled.items()
                                 if size != targets.get(name)))
            targets = rolled
        else:
            break
    return {name: min(size, targets[name]) for name, size in lowest.items()}


def _stalled(deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]],
             all_pods: Sequence[PodFacts], now_ns: int | None, burst: int) -> bool:
    """An unpaused rollout that stands where it is before the scale: its next sync would
    change no ReplicaSet. Only then is the rollout's next step this scale's doing (a
    rollout still in motion deletes old pods whatever the scale)."""
    new_rs = find_new_replicaset(deployment, replicasets)
    if new_rs is None or replicas_of(new_rs, default=0) > replicas_of(deployment):
        return False
    sizes = {name_of(rs): replicas_of(rs, default=0) for rs in replicasets
             if replicas_of(rs, default=0) > 0}
    return _rolling_step(deployment, new_rs, replicasets, sizes, all_pods, now_ns,
                         burst) == sizes


def _rolling_step(deployment: Mapping[str, Any], new_rs: Mapping[str, Any],
                  replicasets: Sequence[Mapping[str, Any]], targets: Mapping[str, int],
                  all_pods: Sequence[PodFacts], now_ns: int | None,
                  burst: int) -> dict[str, int]:
    """One sync of rolling.go `rolloutRolling` on the new targets, with each ReplicaSet's
    availability counted on the pods it keeps: `reconcileNewReplicaSet` scales the new
    ReplicaSet up within maxSurge (NewRSNewReplicas), or else `reconcileOldReplicaSets`
    cleans up unhealthy old pods (`cleanupUnhealthyReplicas`) and scales old ReplicaSets
    down, oldest first, while maxUnavailable allows
    (`scaleDownOldReplicaSetsForRollingUpdate`). `deployment` carries the new count."""
    replicas = replicas_of(deployment)
    new_name = name_of(new_rs)
    sizes = dict(targets)
    new_size = sizes.get(new_name, 0)
    if new_size < replicas:
        room = replicas + max_surge(deployment) - sum(sizes.values())
        if room > 0:
            sizes[new_name] = new_size + min(room, replicas - new_size)
            return sizes
    old = [name_of(rs) for rs in by_creation(replicasets)
           if name_of(rs) != new_name and sizes.get(name_of(rs), 0) > 0]
    if not old:
        return sizes
    available = {name: _available_kept(_named(replicasets, name), size, all_pods,
                                       deployment, now_ns, burst)
                 for name, size in sizes.items()}
    min_available = replicas - max_unavailable(deployment)
    max_scaled_down = (sum(sizes.values()) - min_available
                       - (new_size - available.get(new_name, 0)))
    if max_scaled_down <= 0:
        return sizes
    cleaned = 0
    for name in old:
        if cleaned >= max_scaled_down:
            break
        if sizes[name] == available[name]:
            continue
        count = min(max_scaled_down - cleaned, sizes[name] - available[name])
        sizes[name] -= count
        cleaned += count
    to_scale = sum(available.values()) - min_available
    scaled_down = 0
    for name in old:
        if scaled_down >= to_scale:
            break
        if sizes[name] == 0:
            continue
        count = min(sizes[name], to_scale - scaled_down)
        sizes[name] -= count
        scaled_down += count
    return sizes


def _available_kept(rs: Mapping[str, Any], size: int, all_pods: Sequence[PodFacts],
                    deployment: Mapping[str, Any], now_ns: int | None, burst: int) -> int:
    """The available pods `rs` keeps at `size` (its status once its victims went)."""
    kept = deletions_of_facts(owned_pod_facts(all_pods, rs), all_pods, size, now_ns, burst)
    min_ready_ns = int(spec_of(deployment).get("minReadySeconds") or 0) * 1_000_000_000
    return sum(1 for pod in kept.order[len(kept.victims):]
               if _available(pod, min_ready_ns, now_ns))


def _named(objects: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    return next(obj for obj in objects if name_of(obj) == name)


def stale_saturation(deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]],
                     targets: Mapping[str, int], to_replicas: int,
                     all_pods: Sequence[PodFacts], now_ns: int | None) -> bool:
    """Whether a next sync can find the new ReplicaSet saturated on a stale count, where
    its survivors alone (`after_saturation`) do not make it so.

    The split's update of the new ReplicaSet triggers another sync of the Deployment:
    paused, sync.go `sync` calls `scale`, whose IsSaturated
    (util/deployment_util.go) scales every old ReplicaSet to 0; unpaused, rolling.go
    `rolloutRolling` reaches `reconcileOldReplicaSets`, which counts none of the new
    ReplicaSet's pods as unavailable and, through `cleanupUnhealthyReplicas` and
    `scaleDownOldReplicaSetsForRollingUpdate`, scales the old ReplicaSets to 0 as well.
    Both read `status.availableReplicas`, which until the ReplicaSet controller has seen
    its victims go is stale: the value in the object now (the sync may run before the
    ReplicaSet controller's), or the available pods before the deletions
    (replicaset/replica_set.go `syncReplicaSet` writes `calculateStatus` over the pods it
    listed before deleting). Which of those a sync reads is a race.
    """
    scaled = {**deployment, "spec": {**spec_of(deployment), "replicas": to_replicas}}
    new_rs = find_new_replicaset(scaled, replicasets)
    if new_rs is None or to_replicas == 0 or targets.get(name_of(new_rs)) != to_replicas:
        return False
    if not any(size > 0 for name, size in targets.items() if name != name_of(new_rs)):
        return False
    min_ready_ns = int(spec_of(deployment).get("minReadySeconds") or 0) * 1_000_000_000
    listed = sum(1 for pod in owned_pod_facts(all_pods, new_rs)
                 if pod.active and _available(pod, min_ready_ns, now_ns))
    recorded = int(status_of(new_rs).get("availableReplicas") or 0)
    return to_replicas in (recorded, listed)


def stale_race_groups(groups: Sequence[TieGroup], old_pods: Sequence[RankedPod],
                      new_rs: str) -> list[TieGroup]:
    """The tie groups when the old ReplicaSets' pods (`old_pods`) may all go
    (`stale_saturation`): one group of them all, every one removed in the worst case;
    the other groups keep their members outside it and at most as many removals."""
    old_ids = {id(p) for p in old_pods}
    kept = []
    for group in groups:
        rest = [p for p in group.members if id(p) not in old_ids]
        removed = min(group.removed, len(rest))
        if removed:
            kept.append(TieGroup(members=rest, removed=removed, why=group.why))
    why = (f"its ReplicaSet goes to 0 if the Deployment controller's next sync reads "
           f"{new_rs}'s availability from before its victims went (a race)")
    return [*kept, TieGroup(members=list(old_pods), removed=len(old_pods), why=why)]


def rolling_step_groups(deletions: Mapping[str, Deletion], targets: Mapping[str, int],
                        furthest: Mapping[str, int], tied: list[TieGroup]) -> list[TieGroup]:
    """The pods an unpaused rollout's next syncs may delete beyond `targets`.

    `furthest` is each ReplicaSet's size when `reconcileOldReplicaSets` scales it down
    as far as the survivors' availability allows (`after_saturation`); the controller
    reads that availability from ReplicaSet statuses that may still count the victims,
    so it may stop anywhere from `targets` down to `furthest`. The survivors of each such
    ReplicaSet form one group of which up to the difference go (the verdict takes the
    worst case). A pod already in a group of `tied` stays there (one group per pod)."""
    seen = {id(p) for g in tied for p in g.members}
    groups = []
    for name, deletion in deletions.items():
        extra = targets.get(name, 0) - furthest.get(name, targets.get(name, 0))
        survivors = [p for p in deletion.order[len(deletion.victims):] if id(p) not in seen]
        if extra > 0 and survivors:
            groups.append(TieGroup(
                members=list(survivors), removed=min(extra, len(survivors)),
                why=(f"the rollout's next sync may scale {name} down to {furthest[name]} "
                     "as maxUnavailable allows, depending on when it reads the "
                     "ReplicaSets' availability")))
    return groups


def two_step_group(pods: Sequence[PodFacts], all_pods: Sequence[PodFacts],
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
    # clock, which need not agree with ours on a log2 bucket).
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


def _available(pod: RankedPod | PodFacts, min_ready_ns: int, now_ns: int | None) -> bool:
    """IsPodAvailable: ready, and for at least minReadySeconds."""
    if not pod.ready:
        return False
    if min_ready_ns == 0:
        return True
    return (now_ns is not None and pod.ready_time_ns is not None
            and now_ns - pod.ready_time_ns >= min_ready_ns)


def not_yet_tied(groups: list[TieGroup], tied: list[TieGroup],
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


def tie_groups_over_sync_orders(deletions: Mapping[str, Deletion],
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
