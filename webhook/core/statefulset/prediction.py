"""A StatefulSet's scale-down predicted: condemned ordinals, highest first, and the waits.

Source: pkg/controller/statefulset/stateful_set_control.go (see `stateful_set_control`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..model.blocked import Blocked
from ..model.prediction import ScalePrediction, empty_prediction
from ..model.ranked_pod import RankedPod, ranked_pod
from ..objects.kube import controller_ref, go_parse_int, name_of, namespace_of, spec_of
from ..objects.ownership import identity_of, points_at
from ..objects.podfacts import PodFacts
from ..view.cluster import ClusterView, pod_facts
from .stateful_set_control import condemned_fates, running_and_ready

_STATEFUL_POD_NAME = re.compile(r"^(.*)-([0-9]+)\Z")


def predict_statefulset(view: ClusterView, sts: Mapping[str, Any], to_replicas: int,
                        now_ns: int | None = None, burst: int = 0) -> ScalePrediction:
    """Condemned pods go highest ordinal first; under OrderedReady some may wait
    (`stateful_set_control`): those are `blocked`, not victims. Ordinals decide, so the
    clock and the sync size (`now_ns`, `burst`) play no part."""
    prediction = empty_prediction(sts, to_replicas)
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
    owner = controller_ref(sts)
    if owner is not None:  # a LeaderWorkerSet's, a group leader's, an operator's
        prediction.notes.append(f"StatefulSet {sts_name} is managed by {owner.get('kind')} "
                                f"{owner.get('name')}, which sizes it and will undo a "
                                "direct scale")
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
