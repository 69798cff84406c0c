"""Which controller an object belongs to, and which objects a controller claims.

Sources: apimachinery's metav1.GetControllerOf and pkg/controller/
controller_ref_manager.go (`ClaimPods`, `ClaimReplicaSets`). A controller reference is
kept as (uid, kind, name); `points_at` is the one answer to "does this controller
reference name that object": by UID when both sides have one, else by kind and name
(objects built by hand, and state files, may leave the UID out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from .kube import labels_of, meta, name_of, spec_of, uid_of
from .selectors import compile_workload_selector, workload_selector_matches

Controller = tuple[str, str, str]  # (uid, kind, name) of a controller reference


class Claimable(Protocol):
    """What a claim reads from a pod's facts (`podfacts.PodFacts`)."""

    controller: Controller | None
    deleting: bool
    labels: Mapping[str, str]


_Facts = TypeVar("_Facts", bound=Claimable)


def reference_key(ref: Mapping[str, Any]) -> Controller:
    """(uid, kind, name) of an owner reference; absent fields read as ""."""
    return (ref.get("uid") or "", ref.get("kind") or "", ref.get("name") or "")


def controller_in(metadata: Mapping[str, Any]) -> Controller | None:
    """The reference with `controller: true` among `metadata`'s ownerReferences
    (metav1.GetControllerOf), or None for an orphan."""
    for ref in metadata.get("ownerReferences") or ():
        if ref.get("controller"):
            return reference_key(ref)
    return None


def controller_of(obj: Mapping[str, Any]) -> Controller | None:
    """`controller_in` of an object's metadata."""
    return controller_in(meta(obj))


def identity_of(owner: Mapping[str, Any]) -> Controller:
    """(uid, kind, name) of `owner` itself, as a reference to it would carry them."""
    return (uid_of(owner), owner.get("kind") or "", name_of(owner))


def points_at(controller: Controller | None, owner: Controller) -> bool:
    """`controller` (a reference, None for none) names `owner`: by UID when both have
    one, else by kind and name."""
    if controller is None:
        return False
    if controller[0] and owner[0]:
        return controller[0] == owner[0]
    return controller[1] == owner[1] and controller[2] == owner[2]


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """`obj`'s controller reference points at `owner`."""
    return points_at(controller_of(obj), identity_of(owner))


def owned_objects(candidates: Sequence[Mapping[str, Any]],
                  owner: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Objects the owner's controller claims: controlled by it, or orphans it would adopt.

    Mirrors ClaimPods/ClaimReplicaSets: either way the labels must match the selector.
    """
    selector = spec_of(owner).get("selector")
    identity = identity_of(owner)
    owned = []
    for obj in candidates:
        if not workload_selector_matches(selector, labels_of(obj)):
            continue
        controller = controller_of(obj)
        if points_at(controller, identity) or (
            controller is None and not meta(obj).get("deletionTimestamp")
        ):
            owned.append(obj)
    return owned


def owned_pod_facts(candidates: Sequence[_Facts], owner: Mapping[str, Any],
                    selector_checked: bool = False) -> list[_Facts]:
    """`owned_objects` for pods given as facts, the selector prepared once.

    `selector_checked`: every candidate is known to match the owner's selector.
    """
    identity = identity_of(owner)

    def claimed(facts: _Facts) -> bool:
        controller = facts.controller
        if controller is None:
            return not facts.deleting  # an orphan the controller would adopt
        return points_at(controller, identity)

    # `controller == identity` first, inline: what the controller's own pods carry.
    if selector_checked:
        return [f for f in candidates if f.controller == identity or claimed(f)]
    matches = compile_workload_selector(spec_of(owner).get("selector"))
    return [f for f in candidates
            if matches(f.labels) and (f.controller == identity or claimed(f))]
