"""The Argo Rollouts controller's syncs after a change of a Rollout's `spec.replicas`.

Ported from github.com/argoproj/argo-rollouts v1.10 (branch release-1.10):
- rollout/context.go `reconcile` and rollout/sync.go `isScalingEvent`,
  `syncReplicasOnly`: a `rollout.argoproj.io/desired-replicas` annotation on the new or
  stable ReplicaSet that differs from spec.replicas is a scaling event, and the sync
  only reconciles the ReplicaSets;
- rollout/canary.go `reconcileCanaryReplicaSets` (stable first, then new, then the
  others; a sync that scaled one returns), `scaleDownOldReplicaSetsForCanary`, and
  rollout/replicaset.go `reconcileNewReplicaSet`, `cleanupUnhealthyReplicas`,
  `scaleDownDelayHelper` (the `scale-down-deadline` annotation), `isReplicaSetReferenced`
  (the hashes in the status; Services are not read: such a ReplicaSet counts as
  unreferenced, which can only add victims);
- rollout/bluegreen.go `reconcileBlueGreenReplicaSets` (stable to spec.replicas, new,
  then `scaleDownOldReplicaSetsForBlueGreen`: an old ReplicaSet within its
  scaleDownDelay follows spec.replicas, one past it goes to 0).

Syncs are replayed until nothing changes, once per reading of what the code leaves to
timing (`Variant`: scale-down deadlines close to now passed or not, a blue-green
post-promotion analysis finished or not), with availability as the statuses say now
(`replay`); `reachable_lowest` explores every order in which availability can change
between syncs. The caller judges the spread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..objects.kube import go_parse_int, spec_of, status_of
from .argo_rollout_counts import (
    Counted,
    basic_canary_counts,
    canary_of,
    max_unavailable,
    new_rs_replicas,
    rollout_replicas,
    stable_exists,
    strategy,
    traffic_routed,
    traffic_routed_counts,
)

_MAX_SYNCS = 24  # each sync changes one ReplicaSet or ends; real cases settle in a few
MAX_INT32 = 2**31 - 1

# The deadline of a ReplicaSet, as the controller would read it now.
FUTURE, PAST, NEAR = "future", "past", "near"  # NEAR: either, depending on timing


@dataclass
class Tracked(Counted):
    """A ReplicaSet in the replay: the counts plus what the scale-down loops read."""

    revision: str = ""  # rollout.argoproj.io/revision
    created_ns: int = 0
    deadline: str | None = None  # FUTURE, PAST, NEAR, or None without the annotation
    lowest: int = 0  # the lowest spec.replicas so far: pods above it are gone


@dataclass(frozen=True)
class Variant:
    """One reading of what the controller's code leaves to timing."""

    deadlines_passed: bool  # NEAR deadlines read as passed
    analysis_done: bool  # a blue-green post-promotion analysis counted as successful


@dataclass
class Replay:
    """The sizes one variant leads to: the lowest (what is deleted), the last, and every
    size each ReplicaSet was set to on the way (its ReplicaSet controller may sync on
    any of them, ranking again what is left)."""

    lowest: dict[str, int] = field(default_factory=dict)
    final: dict[str, int] = field(default_factory=dict)
    steps: dict[str, list[int]] = field(default_factory=dict)


Availability = Callable[[str, int], int]  # (ReplicaSet, lowest size) -> available pods


def replay(rollout: Mapping[str, Any], states: Sequence[Tracked], new_name: str | None,
           stable_name: str | None, variant: Variant) -> Replay:
    """The controller's syncs for `rollout` (carrying the new spec.replicas) from
    `states`, with the ReplicaSets' availability as their status says now."""
    tracked = {rs.name: replace(rs, lowest=rs.replicas) for rs in states}
    steps: dict[str, list[int]] = {name: [] for name in tracked}
    for _ in range(_MAX_SYNCS):
        changed = sync_once(rollout, tracked, new_name, stable_name, variant)
        for name in changed:
            steps[name].append(tracked[name].replicas)
        if not changed:
            break
    return Replay({n: rs.lowest for n, rs in tracked.items()},
                  {n: rs.replicas for n, rs in tracked.items()}, steps)


def sync_once(rollout: Mapping[str, Any], tracked: Mapping[str, Tracked], new_name: str | None,
          stable_name: str | None, variant: Variant) -> list[str]:
    """One sync of the Rollouts controller; the ReplicaSets it changed."""
    before = {name: rs.replicas for name, rs in tracked.items()}
    sync = _blue_green_sync if strategy(rollout, "blueGreen") is not None else _canary_sync
    sync(rollout, tracked, new_name, stable_name, variant)
    changed = [name for name, rs in tracked.items() if rs.replicas != before[name]]
    for name in changed:
        tracked[name].lowest = min(tracked[name].lowest, tracked[name].replicas)
    return changed


_State = tuple[tuple[int, int, int, str | None], ...]  # (replicas, available, lowest, deadline)


def reachable_lowest(rollout: Mapping[str, Any], states: Sequence[Tracked],
                     new_name: str | None, stable_name: str | None, variant: Variant,
                     fresh: Availability, limit: int = 4096) -> dict[str, int] | None:
    """Each ReplicaSet's lowest size over every order in which its syncs can read
    availability: between any two syncs, a ReplicaSet's status may still count its
    victims (the status now), no longer count them (`fresh`), or count all its pods
    up and ready (new pods become available in time). None past `limit` states."""
    names = [rs.name for rs in states]
    base = {rs.name: rs for rs in states}

    def unpack(state: _State) -> dict[str, Tracked]:
        return {n: replace(base[n], replicas=r, available=a, lowest=low, deadline=d)
                for n, (r, a, low, d) in zip(names, state, strict=True)}

    def pack(tracked: Mapping[str, Tracked]) -> _State:
        return tuple((t.replicas, t.available, t.lowest, t.deadline)
                     for t in (tracked[n] for n in names))

    start = pack({n: replace(rs, lowest=rs.replicas) for n, rs in base.items()})
    seen, todo = {start}, [start]
    least = {rs.name: rs.replicas for rs in states}
    while todo:
        state = todo.pop()
        tracked = unpack(state)
        sync_once(rollout, tracked, new_name, stable_name, variant)
        following = [pack(tracked)]
        for index, (name, (replicas, available, low, deadline)) in enumerate(
                zip(names, state, strict=True)):
            least[name] = min(least[name], low)
            for now in {min(available, fresh(name, low)), replicas} - {available}:
                following.append((*state[:index], (replicas, now, low, deadline),
                                  *state[index + 1:]))
        for candidate in following:
            if candidate not in seen:
                if len(seen) >= limit:
                    return None
                seen.add(candidate)
                todo.append(candidate)
    return least


def _split(tracked: Mapping[str, Tracked], new_name: str | None,
           stable_name: str | None) -> tuple[Tracked | None, Tracked | None, list[Tracked]]:
    new = tracked.get(new_name) if new_name else None
    stable = tracked.get(stable_name) if stable_name else None
    others = [rs for rs in tracked.values() if rs is not new and rs is not stable]
    return new, stable, others


def _canary_sync(rollout: Mapping[str, Any], tracked: Mapping[str, Tracked],
                 new_name: str | None, stable_name: str | None, variant: Variant) -> None:
    """One `reconcileCanaryReplicaSets`: it returns after the first ReplicaSet it scales."""
    new, stable, others = _split(tracked, new_name, stable_name)
    if stable_exists(new, stable):
        assert stable is not None
        want = (traffic_routed_counts(rollout, new, stable)[1] if traffic_routed(rollout)
                else basic_canary_counts(rollout, new, stable, others)[1])
        if want != stable.replicas:
            stable.replicas = want
            return
    if new is not None:
        want = new_rs_replicas(rollout, new, stable, others)
        if want != new.replicas:
            new.replicas = want
            return
    _scale_down_old_canary(rollout, [rs for rs in others if rs.replicas > 0],
                           list(tracked.values()), variant)


def _scale_down_old_canary(rollout: Mapping[str, Any], old: list[Tracked],
                           everything: list[Tracked], variant: Variant) -> None:
    """scaleDownOldReplicaSetsForCanary, after cleanupUnhealthyReplicas."""
    if not old:
        return
    for rs in sorted(old, key=lambda r: (r.created_ns, r.name)):
        if rs.replicas == rs.available:
            continue
        if rs.available > rs.replicas:  # Go returns an error: nothing more this sync
            return
        rs.replicas = rs.available
    budget = (sum(rs.available for rs in everything)
              - (rollout_replicas(rollout) - max_unavailable(rollout)))
    if budget <= 0:
        return
    routed = traffic_routed(rollout)
    promoted = _fully_promoted(rollout)
    annotated = 0
    for rs in by_revision_newest_first(old):
        if routed and referenced(rollout, rs.pod_hash):
            continue
        if budget <= 0:
            break
        if rs.replicas == 0:
            continue
        desired = 0
        if not routed:
            desired = rs.replicas - budget if rs.replicas > budget else 0
        elif (promoted or rs.deadline is not None) and not canary_of(rollout).get(
                "dynamicStableScale"):
            annotated, desired = _delay_helper(rollout, rs, annotated, rs.replicas, variant)
        if rs.replicas != desired:
            budget -= rs.replicas - desired
            rs.replicas = desired


def _blue_green_sync(rollout: Mapping[str, Any], tracked: Mapping[str, Tracked],
                     new_name: str | None, stable_name: str | None, variant: Variant) -> None:
    """One `reconcileBlueGreenReplicaSets`: stable, new and old ReplicaSets in one sync."""
    new, stable, others = _split(tracked, new_name, stable_name)
    replicas = rollout_replicas(rollout)
    if stable is not None:
        stable.replicas = replicas
    if new is not None:
        new.replicas = new_rs_replicas(rollout, new, stable, others)
    if not variant.analysis_done and post_promotion_wait(rollout, new):
        return
    if _paused_for(rollout, "InconclusiveAnalysis"):
        return
    annotated = 0
    for rs in by_revision_newest_first([rs for rs in others if rs.replicas > 0]):
        if referenced(rollout, rs.pod_hash):
            continue
        annotated, rs.replicas = _delay_helper(rollout, rs, annotated, replicas, variant)


def post_promotion_wait(rollout: Mapping[str, Any], new: Counted | None) -> bool:
    """A blue-green rollout whose old ReplicaSets wait for a post-promotion analysis
    (no scaleDownDelaySeconds, skipPostPromotionAnalysisRun false): whether it has
    succeeded is in an AnalysisRun poolguard does not read."""
    blue_green = strategy(rollout, "blueGreen") or {}
    if not blue_green.get("postPromotionAnalysis") or blue_green.get(
            "scaleDownDelaySeconds") is not None or new is None:
        return False
    status = status_of(rollout)
    active = (status.get("blueGreen") or {}).get("activeSelector") or ""
    return bool(new.pod_hash) and status.get("stableRS") != new.pod_hash and (
        active == new.pod_hash)


def _delay_helper(rollout: Mapping[str, Any], rs: Tracked, annotated: int,
                  replicas: int, variant: Variant) -> tuple[int, int]:
    """scaleDownDelayHelper: (annotated so far, desired replicas). An old ReplicaSet
    without a deadline gets one and keeps its size; within its deadline it has
    `replicas`; past it (or beyond scaleDownDelayRevisionLimit) it goes to 0."""
    limit = _revision_limit(rollout)
    if rs.deadline is None:
        if rs.replicas > 0 and annotated < limit:
            rs.deadline = FUTURE
            return annotated + 1, rs.replicas
        return annotated, 0
    annotated += 1
    if annotated > limit:
        return annotated, 0
    passed = rs.deadline == PAST or (rs.deadline == NEAR and variant.deadlines_passed)
    return annotated, 0 if passed else replicas


def _revision_limit(rollout: Mapping[str, Any]) -> int:
    """GetScaleDownRevisionLimit: scaleDownDelayRevisionLimit, unlimited by default."""
    for which in ("blueGreen", "canary"):
        value = (strategy(rollout, which) or {}).get("scaleDownDelayRevisionLimit")
        if value is not None:
            return int(value)
    return MAX_INT32


def referenced(rollout: Mapping[str, Any], pod_hash: str) -> bool:
    """isReplicaSetReferenced, on the hashes in the status (Services are not read)."""
    if not pod_hash:
        return False
    status = status_of(rollout)
    blue_green = status.get("blueGreen") or {}
    hashes = [status.get("stableRS"), status.get("currentPodHash"),
              blue_green.get("activeSelector"), blue_green.get("previewSelector")]
    weights = (status.get("canary") or {}).get("weights")
    if weights:
        hashes += [(weights.get("canary") or {}).get("podTemplateHash"),
                   (weights.get("stable") or {}).get("podTemplateHash")]
    return pod_hash in hashes


def _fully_promoted(rollout: Mapping[str, Any]) -> bool:
    """IsFullyPromoted: status.stableRS equals status.currentPodHash."""
    status = status_of(rollout)
    return (status.get("stableRS") or "") == (status.get("currentPodHash") or "")


def _paused_for(rollout: Mapping[str, Any], reason: str) -> bool:
    return any(c.get("reason") == reason for c in status_of(rollout).get("pauseConditions") or ())


def halted(rollout: Mapping[str, Any]) -> str | None:
    """haltProgress for a canary: why the controller scales no ReplicaSet now."""
    if strategy(rollout, "canary") is None:
        return None
    if spec_of(rollout).get("paused"):
        return "the rollout is paused (spec.paused)"
    if _paused_for(rollout, "InconclusiveAnalysis"):
        return "the rollout is paused on an inconclusive analysis"
    return None


def by_revision_newest_first(replicasets: Sequence[Tracked]) -> list[Tracked]:
    """sort.Reverse(ReplicaSetsByRevisionNumber): highest revision first; equal or
    unparsable revisions by creation, newest first."""
    def key(rs: Tracked) -> tuple[int, int, int, str]:
        revision = go_parse_int(rs.revision) if rs.revision else None
        return (revision is not None, revision or 0, rs.created_ns, rs.name)
    return sorted(replicasets, key=key, reverse=True)
