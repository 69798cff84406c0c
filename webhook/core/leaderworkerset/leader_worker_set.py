"""Which groups a LeaderWorkerSet scale-down removes, now and once its controller stops waiting.

Sources: sigs.k8s.io/lws v0.10.0; the functions below are the same in v0.9.0, the newest
release the Go module proxy serves, which the e2e tier builds and verifies against.

- pkg/controllers/leaderworkerset_controller.go (`constructLeaderStatefulSetApplyConfiguration`,
  `rollingUpdateParameters`, `calculateRollingUpdateReplicas`, `getReplicaStates`,
  `calculateLWSUnreadyReplicas`): the leader StatefulSet is named like the LeaderWorkerSet,
  has `podManagementPolicy: Parallel`, no `ordinals` (ordinal = group index, from 0) and
  the selector {name, worker-index: "0"}. Its `spec.replicas` is the LeaderWorkerSet's,
  except during a rolling update or while groups in the new range are not ready and
  updated: then up to `maxSurge` extra groups are kept (below).
- pkg/controllers/pod_controller.go (`constructWorkerStatefulSetApplyConfiguration`): each
  leader pod `<lws>-<g>` owns (controller reference) a worker StatefulSet named like it,
  Parallel, `replicas: size - 1`, `ordinals.start: 1`: workers `<lws>-<g>-<w>`, w >= 1.
- pkg/webhooks/pod_webhook.go (`Default`): labels a leader with its group index (the
  ordinal of its name), a worker with its worker index (the ordinal of its name).
- api/leaderworkerset/v1/leaderworkerset_types.go: the label keys; pkg/webhooks/
  leaderworkerset_webhook.go: defaults (maxUnavailable 1, maxSurge 0, partition 0).
- pkg/utils/statefulset/statefulset_utils.go (`StatefulsetReady`), pkg/utils/pod/
  pod_utils.go (`PodRunningAndReady`): what a ready group is.

A scale-down to `r` groups: the controller writes the leader StatefulSet's replicas `k`
(`leader_replicas`, `k >= r`); the StatefulSet controller deletes every leader whose
ordinal is `k` or more at once (Parallel: no OrderedReady stall); the garbage collector
then deletes each such leader's worker StatefulSet and its pods. Deletion cost plays no
part. The groups in `[r, k)` are the surge the controller keeps while more than
`maxUnavailable` groups in the new range are not ready and updated: they go once those
groups are (each later reconcile recomputes `k`), so they are `blocked`, not victims.
With `rollingUpdateConfiguration.partition` set, the groups below it keep an old
revision for as long as it holds (the deferred `max` in `rollingUpdateParameters`), so
they count as not updated forever: the surge they keep (`k` computed over them alone)
stays, as the API's doc on `partition` says, and those groups survive; only the rest of
the surge is `blocked`.

A scale-down made during a rolling update (`rollingUpdateParameters`, "replicas changed
during rolling update"; `rollingUpdatePartition`) lets the update go on: the groups of an
old revision from the rollout's partition up that the scale-down does not remove, a kept
surge group included, may be deleted and recreated, how far depending on when the
replacements are ready. They are `REPLACED` (possible victims), not survivors or blocked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from ..model.blocked import Wait
from ..model.ranked_pod import RankedPod, ranked_pod
from ..model.units import BLOCKED, POSSIBLE_VICTIM, SURVIVES, VICTIM
from ..objects.intstr import scaled_int_or_percent
from ..objects.kube import (
    annotations_of,
    go_parse_int,
    labels_of,
    name_of,
    namespace_of,
    spec_of,
    status_of,
)
from ..objects.podfacts import PodFacts
from ..statefulset.stateful_set_control import running_and_ready
from ..view.cluster import ClusterView, candidate_pod_facts

SET_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
REVISION_LABEL = "leaderworkerset.sigs.k8s.io/template-revision-hash"
REPLICAS_ANNOTATION = "leaderworkerset.sigs.k8s.io/replicas"

# A group the rolling update under way may delete and recreate (leader under the same
# name, workers with the old worker StatefulSet): when depends on its replacements' readiness.
REPLACED = POSSIBLE_VICTIM
_FIRST = itemgetter(0)


@dataclass
class LwsGroup:
    """One replica of a LeaderWorkerSet: its leader and workers (active pods) and its fate."""

    index: int
    leader: RankedPod | None
    workers: list[RankedPod] = field(default_factory=list)  # by worker index
    fate: str = SURVIVES

    @property
    def head(self) -> RankedPod | None:
        """The leader: the group's unit head (`ReplicaUnit`)."""
        return self.leader

    @property
    def rest(self) -> list[RankedPod]:
        """The workers."""
        return self.workers

    @property
    def pods(self) -> list[RankedPod]:
        """Leader first, then workers: the group's pods as they are shown and ordered."""
        return ([self.leader] if self.leader is not None else []) + self.workers


@dataclass
class LwsScale:
    """Groups by fate after a scale-down, highest group index first."""

    groups: list[LwsGroup]
    leader_replicas: int  # what the controller writes on the leader StatefulSet now
    size: int  # pods per group (spec.leaderWorkerTemplate.size)
    wait: Wait | None = None  # what the blocked groups wait on
    notes: list[str] = field(default_factory=list)


def scale_groups(view: ClusterView, lws: Mapping[str, Any], to_replicas: int) -> LwsScale:
    """The fates of `lws`'s groups when its replicas go to `to_replicas`."""
    namespace, name = namespace_of(lws), name_of(lws)
    leader_sts = view.workload("StatefulSet", namespace, name)
    everyone = set_pods(view, namespace, name)
    groups = _groups(everyone, name)
    notes: list[str] = []
    kept = held = to_replicas
    wait = None
    if leader_sts is not None:
        kept, held, wait = _kept_by_controller(view, lws, leader_sts, to_replicas, everyone,
                                               notes)
    elif groups:  # a new LeaderWorkerSet has neither
        notes.append(f"leader StatefulSet {name} is not in the view: the groups at index "
                     f"{to_replicas} and above are taken to go at once")
    for group in groups.values():
        group.fate = (SURVIVES if group.index < held
                      else BLOCKED if group.index < kept else VICTIM)
    ordered = [groups[index] for index in sorted(groups, reverse=True)]
    if leader_sts is not None:
        _mark_replaced(lws, leader_sts, ordered, notes)
    blocked = sorted(group.index for group in ordered if group.fate == BLOCKED)
    if blocked and wait is not None:
        notes.append(f"the LeaderWorkerSet controller keeps group{_s(len(blocked))} "
                     f"{', '.join(map(str, blocked))} for now: {wait.reason}")
    waits = wait if blocked and kept > held else None
    return LwsScale(ordered, kept, group_size(lws), waits, notes)


def _mark_replaced(lws: Mapping[str, Any], leader_sts: Mapping[str, Any],
                   ordered: Sequence[LwsGroup], notes: list[str]) -> None:
    """Mark `REPLACED` the groups the rolling update under way may recreate.

    A group is outdated when its leader's template-revision-hash differs from the leader
    StatefulSet's (the LeaderWorkerSet's current revision, which every reconcile applies).
    After a scale-down made mid-update, `rollingUpdateParameters` sets the new count and
    partition ("replicas changed during rolling update"); the next reconciles widen the
    rolling step by the surge given back and lower the partition (`rollingUpdatePartition`)
    as replacements become ready, and the StatefulSet controller recreates every outdated
    leader at or above it. Only the partition of `rollingUpdateConfiguration` stops it, so
    every outdated group from there up that is not removed outright may go now or later:
    how far the update gets depends on when the replacements are ready. A kept surge group
    of an old revision is such a group too: it may be replaced before it is reclaimed.
    """
    revision = labels_of(leader_sts).get(REVISION_LABEL, "")
    floor = _int(_rolling_config(lws).get("partition"), 0)
    replaced = []
    for group in ordered:
        leader = group.leader
        if (group.fate in (SURVIVES, BLOCKED) and group.index >= floor and leader is not None
                and leader.facts.labels.get(REVISION_LABEL, "") != revision):
            group.fate = REPLACED
            replaced.append(group.index)
    if replaced:
        shown = ", ".join(map(str, sorted(replaced)))
        notes.append(f"a rolling update is under way: the LeaderWorkerSet controller goes on "
                     f"with it after the scale and replaces the outdated group"
                     f"{_s(len(replaced))} {shown} (each leader is recreated under its name, "
                     "its workers go with the old worker StatefulSet) as the replacements "
                     "become ready; when depends on their readiness, so their pods are "
                     "possible victims")


def _rolling_config(lws: Mapping[str, Any]) -> Mapping[str, Any]:
    """spec.rolloutStrategy.rollingUpdateConfiguration, {} when unset."""
    return (spec_of(lws).get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}


def set_pods(view: ClusterView, namespace: str, name: str) -> list[PodFacts]:
    """Every pod (active or not) labelled as LeaderWorkerSet `name`'s, from the view's index."""
    pods, exact = candidate_pod_facts(view, namespace, [{"matchLabels": {SET_NAME_LABEL: name}}])
    return list(pods) if exact else [f for f in pods if f.labels.get(SET_NAME_LABEL) == name]


def _groups(everyone: Sequence[PodFacts], name: str) -> dict[int, LwsGroup]:
    """The active pods of `name`'s groups, by group index (the leader's ordinal)."""
    groups: dict[int, LwsGroup] = {}
    workers: dict[int, list[tuple[int, RankedPod]]] = {}
    for facts in everyone:
        where = group_position(facts, name) if facts.active else None
        if where is None:
            continue
        index, worker = where
        group = groups.setdefault(index, LwsGroup(index, None))
        if worker == 0:
            group.leader = ranked_pod(facts, 0)
        else:
            workers.setdefault(index, []).append((worker, ranked_pod(facts, 0)))
    for index, members in workers.items():
        groups[index].workers = [pod for _, pod in sorted(members, key=_FIRST)]
    return groups


def group_position(facts: PodFacts, name: str) -> tuple[int, int] | None:
    """(group index, worker index) of a pod of LeaderWorkerSet `name`, worker index 0 for
    the leader; None for a pod that is not one of its groups' pods.

    A leader is a pod `<name>-<g>` of the leader StatefulSet `<name>`; a worker is a pod
    `<name>-<g>-<w>` of the worker StatefulSet `<name>-<g>`. Both go by their names, as the
    StatefulSet controller and the garbage collector do (the labels only tell which
    LeaderWorkerSet a pod belongs to).
    """
    controller = facts.controller
    if controller is None or controller[1] != "StatefulSet":
        return None
    parent, ordinal = _ordinal(facts.name)
    if ordinal is None or parent != controller[2]:
        return None
    if parent == name:
        return ordinal, 0
    group_parent, group = _ordinal(parent)
    if group_parent != name or group is None or ordinal < 1:
        return None
    return group, ordinal


def _ordinal(pod_name: str) -> tuple[str, int | None]:
    """getParentNameAndOrdinal: (parent, ordinal) for `<parent>-<ordinal>`, ordinal None
    when the name has none (ParseInt into 32 bits, as the StatefulSet controller)."""
    parent, dash, digits = pod_name.rpartition("-")
    if not dash or not digits.isascii() or not digits.isdigit():
        return "", None
    return parent, go_parse_int(digits, 32)


# --- the leader StatefulSet's replicas ---------------------------------------------------


def _kept_by_controller(view: ClusterView, lws: Mapping[str, Any], leader_sts: Mapping[str, Any],
                        to_replicas: int, everyone: Sequence[PodFacts],
                        notes: list[str]) -> tuple[int, int, Wait | None]:
    """rollingUpdateParameters' replicas for the scaled LeaderWorkerSet now, the replicas
    it keeps for as long as the rollout's partition holds, and what the surge between
    the two waits on.

    The template does not change in a scale, so the rolling-update case of a new
    revision does not arise; the revision is the leader StatefulSet's label.
    """
    sts_spec = spec_of(leader_sts)
    sts_replicas = _int(sts_spec.get("replicas"), 1)
    rolling = (sts_spec.get("updateStrategy") or {}).get("rollingUpdate") or {}
    partition = _int(rolling.get("partition"), 0)
    if (partition == 0 and sts_replicas == to_replicas) or sts_replicas < to_replicas:
        return to_replicas, to_replicas, None
    config = _rolling_config(lws)
    try:
        surge = min(scaled_int_or_percent(config.get("maxSurge", 0), to_replicas, True),
                    to_replicas)
        unavailable = scaled_int_or_percent(config.get("maxUnavailable", 1), to_replicas, False)
    except ValueError:
        notes.append("maxSurge or maxUnavailable is not a valid value: the LeaderWorkerSet "
                     "controller fails every sync and deletes nothing")
        return sts_replicas, to_replicas, Wait(name_of(leader_sts), "the controller cannot "
                                               "read its rollingUpdateConfiguration")
    if go_parse_int(annotations_of(leader_sts).get(REPLICAS_ANNOTATION) or "", 32) is None:
        notes.append(f"leader StatefulSet {name_of(leader_sts)} has no valid "
                     f"{REPLICAS_ANNOTATION} annotation: the LeaderWorkerSet controller fails "
                     "every sync during a rolling update and deletes nothing")
        return sts_replicas, to_replicas, Wait(name_of(leader_sts), f"the controller cannot "
                                               f"read {REPLICAS_ANNOTATION}")
    if surge == 0:  # calculateRollingUpdateReplicas keeps no group without a surge
        return to_replicas, to_replicas, None
    unready = unready_groups(view, lws, leader_sts, to_replicas, everyone)
    kept = rolling_update_replicas(to_replicas, surge, unavailable, len(unready))
    pinned = pinned_groups(lws, leader_sts, to_replicas, everyone)
    held = rolling_update_replicas(to_replicas, surge, unavailable, len(pinned))
    if held > to_replicas:
        notes.append(_pinned_note(lws, pinned, to_replicas, held))
    waiting = [index for index in unready if index not in pinned]
    if kept <= held or not waiting:
        return kept, held, None
    shown = ", ".join(f"{name_of(lws)}-{index}" for index in waiting[:5])
    more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
    return kept, held, Wait(f"{name_of(lws)}-{waiting[0]}", (
        f"{len(unready)} group{_s(len(unready))} in the new range ({shown}{more}"
        f"{' among them' if pinned else ''}) {'is' if len(unready) == 1 else 'are'} not "
        f"ready and updated, more than maxUnavailable ({unavailable}) allows without the "
        f"surge (maxSurge {surge})"), True)


def pinned_groups(lws: Mapping[str, Any], leader_sts: Mapping[str, Any], to_replicas: int,
                  everyone: Sequence[PodFacts]) -> list[int]:
    """The groups below both the rollout's `partition` and `to_replicas` whose leader is
    of an old revision: the controller never lowers the leader StatefulSet's partition
    below the rollout's, so they stay outdated, and `calculateLWSUnreadyReplicas` counts
    them for as long as the partition holds. A group whose leader is missing is not
    counted: what it is recreated as is not in the objects (not counting it can only
    make more groups `blocked`)."""
    floor = min(_int(_rolling_config(lws).get("partition"), 0), to_replicas)
    revision = labels_of(leader_sts).get(REVISION_LABEL, "")
    leaders = _leaders_by_index(everyone)
    return [index for index in range(floor)
            if index in leaders and leaders[index].name == f"{name_of(lws)}-{index}"
            and leaders[index].labels.get(REVISION_LABEL, "") != revision]


def _pinned_note(lws: Mapping[str, Any], pinned: Sequence[int], to_replicas: int,
                 held: int) -> str:
    kept = ", ".join(map(str, range(to_replicas, held)))
    return (f"rollingUpdateConfiguration.partition holds group{_s(len(pinned))} "
            f"{', '.join(map(str, pinned))} at an old revision: the LeaderWorkerSet "
            f"controller counts {'it' if len(pinned) == 1 else 'them'} as not updated and "
            f"keeps the surge group{_s(held - to_replicas)} {kept} for as long as the "
            "partition holds (until the update is done and the partition is reset to 0)")


def rolling_update_replicas(replicas: int, surge: int, unavailable: int, unready: int) -> int:
    """calculateRollingUpdateReplicas: the leader StatefulSet's replicas during an update."""
    if unready <= surge:
        return replicas + max(0, unready - unavailable)
    return replicas + surge


def unready_groups(view: ClusterView, lws: Mapping[str, Any], leader_sts: Mapping[str, Any],
                   to_replicas: int, everyone: Sequence[PodFacts]) -> list[int]:
    """calculateLWSUnreadyReplicas over getReplicaStates: the group indices below
    `to_replicas` whose leader is not Running and Ready or not of the current revision,
    or whose worker StatefulSet is missing, not ready (`StatefulsetReady`) or not of it."""
    name, namespace = name_of(lws), namespace_of(lws)
    revision = labels_of(leader_sts).get(REVISION_LABEL, "")
    leaders = _leaders_by_index(everyone)
    size = group_size(lws)
    unready = []
    for index in range(to_replicas):
        nominated = f"{name}-{index}"
        leader = leaders.get(index)
        ok = (leader is not None and leader.name == nominated and running_and_ready(leader)
              and leader.labels.get(REVISION_LABEL, "") == revision)
        if ok and size != 1:
            workers = view.workload("StatefulSet", namespace, nominated)
            ok = workers is not None and _worker_set_ready(workers, index, revision)
        if not ok:
            unready.append(index)
    return unready


def _leaders_by_index(everyone: Sequence[PodFacts]) -> dict[int, PodFacts]:
    """getReplicaStates' leader pods: listed by labels, placed by group-index (SortByIndex)."""
    leaders: dict[int, PodFacts] = {}
    for facts in everyone:
        labels = facts.labels
        index = go_parse_int(labels.get(GROUP_INDEX_LABEL) or "", 64)
        if labels.get(WORKER_INDEX_LABEL) == "0" and index is not None and index >= 0:
            leaders[index] = facts
    return leaders


def workers_wait_for_leader(lws: Mapping[str, Any], group: LwsGroup) -> bool:
    """A group without workers whose leader is not ready, under `startupPolicy:
    LeaderReady`: the pod controller creates the worker StatefulSet only once the leader
    is ready (pod_controller.go, `Reconcile`: "defer the creation of the worker
    statefulset because leader pod is not ready", `podutils.IsPodReady`), so the group
    has its leader alone, as the controller means it to."""
    return (spec_of(lws).get("startupPolicy") == "LeaderReady" and not group.workers
            and group.leader is not None and not group.leader.facts.ready)


def group_size(lws: Mapping[str, Any]) -> int:
    """spec.leaderWorkerTemplate.size: pods per group, leader included (default 1)."""
    return _int((spec_of(lws).get("leaderWorkerTemplate") or {}).get("size"), 1)


def _worker_set_ready(sts: Mapping[str, Any], index: int, revision: str) -> bool:
    """StatefulsetReady, of the current revision, and labelled as group `index`'s."""
    status, labels = status_of(sts), labels_of(sts)
    return (_int(spec_of(sts).get("replicas"), 1) == _int(status.get("availableReplicas"), 0)
            and status.get("currentRevision") == status.get("updateRevision")
            and labels.get(GROUP_INDEX_LABEL) == str(index)
            and labels.get(REVISION_LABEL, "") == revision)


def _int(value: Any, default: int) -> int:
    return default if value is None or isinstance(value, bool) else int(value)


def _s(count: int) -> str:
    return "" if count == 1 else "s"
