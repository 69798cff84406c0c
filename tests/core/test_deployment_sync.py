"""The Deployment controller's scale(): how a change splits between its ReplicaSets.

Upstream sources (kubernetes/kubernetes):
- pkg/controller/deployment/sync_test.go, TestScale (recent version: ktesting, ptr).
  Its harness annotates every ReplicaSet with SetReplicasAnnotations(rs,
  desired=old.spec.replicas, max=desired+MaxSurge(old)) and newDeployment() defaults
  maxSurge and maxUnavailable to 0.
- pkg/controller/deployment/sync.go (scale) and util/deployment_util.go (IsSaturated,
  FindActiveOrLatest).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import factories as f
from webhook.core.deployment_sync import replicaset_targets
from webhook.core.deployment_util import (
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    max_surge,
)

NEW_TS = "2016-05-20T02:00:00Z"  # newTimestamp
OLD_TS = "2016-05-20T01:00:00Z"  # oldTimestamp
OLDER_TS = "2016-05-20T00:00:00Z"  # olderTimestamp
NEW_IMAGE = "foo/bar"
OLD_IMAGE = "foo/bar:old"


# --- TestScale --------------------------------------------------------------------------


def scale_deployment(replicas: int, max_surge_value: Any = 0, max_unavailable: Any = 0,
                     image: str = NEW_IMAGE) -> dict[str, Any]:
    """newDeployment("foo", replicas, nil, maxSurge, maxUnavailable, ...)."""
    return f.deployment("foo", "default", replicas, image=image, max_surge=max_surge_value,
                        max_unavailable=max_unavailable)


# (name, deployment (replicas, surge), old deployment (replicas, surge),
#  new RS (name, size, ts) or None, old RSs [(name, size, ts)], expected sizes,
#  desiredReplicasAnnotations, extra: dict)
SCALE_CASES: list[tuple[Any, ...]] = [
    ("normal scaling event: 10 -> 12", (12, 0), (10, 0), ("foo-v1", 10, NEW_TS), [],
     {"foo-v1": 12}, {}, {}),
    ("normal scaling event: 10 -> 5", (5, 0), (10, 0), ("foo-v1", 10, NEW_TS), [],
     {"foo-v1": 5}, {}, {}),
    ("proportional scaling: 5 -> 10", (10, 0), (5, 0), ("foo-v2", 2, NEW_TS),
     [("foo-v1", 3, OLD_TS)], {"foo-v2": 4, "foo-v1": 6}, {}, {}),
    ("proportional scaling: 5 -> 3", (3, 0), (5, 0), ("foo-v2", 2, NEW_TS),
     [("foo-v1", 3, OLD_TS)], {"foo-v2": 1, "foo-v1": 2}, {}, {}),
    ("proportional scaling: 9 -> 4", (4, 0), (9, 0), ("foo-v2", 8, NEW_TS),
     [("foo-v1", 1, OLD_TS)], {"foo-v2": 4, "foo-v1": 0}, {}, {}),
    ("proportional scaling: 7 -> 10", (10, 0), (7, 0), ("foo-v3", 2, NEW_TS),
     [("foo-v2", 3, OLD_TS), ("foo-v1", 2, OLDER_TS)],
     {"foo-v3": 3, "foo-v2": 4, "foo-v1": 3}, {}, {}),
    ("proportional scaling: 13 -> 8", (8, 0), (13, 0), ("foo-v3", 2, NEW_TS),
     [("foo-v2", 8, OLD_TS), ("foo-v1", 3, OLDER_TS)],
     {"foo-v3": 1, "foo-v2": 5, "foo-v1": 2}, {}, {}),
    ("leftover distribution: 3 -> 4", (4, 0), (3, 0), ("foo-v3", 1, NEW_TS),
     [("foo-v2", 1, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     {"foo-v3": 2, "foo-v2": 1, "foo-v1": 1}, {}, {}),
    ("leftover distribution: 3 -> 2", (2, 0), (3, 0), ("foo-v3", 1, NEW_TS),
     [("foo-v2", 1, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     {"foo-v3": 1, "foo-v2": 1, "foo-v1": 0}, {}, {}),
    ("proportional scaling (no new rs): 4 -> 5", (5, 0), (4, 0), None,
     [("foo-v2", 2, OLD_TS), ("foo-v1", 2, OLDER_TS)], {"foo-v2": 3, "foo-v1": 2}, {}, {}),
    ("proportional scaling: 6 -> 0", (0, 0), (6, 0), ("foo-v3", 3, NEW_TS),
     [("foo-v2", 2, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     {"foo-v3": 0, "foo-v2": 0, "foo-v1": 0}, {}, {}),
    ("proportional scaling: 0 -> 6", (6, 0), (6, 0), ("foo-v3", 0, NEW_TS),
     [("foo-v2", 0, OLD_TS), ("foo-v1", 0, OLDER_TS)],
     {"foo-v3": 6, "foo-v2": 0, "foo-v1": 0}, {}, {}),
    ("failed rs update", (5, 0), (5, 0), ("foo-v3", 2, NEW_TS),
     [("foo-v2", 1, OLD_TS), ("foo-v1", 1, OLDER_TS)],
     # Upstream drops the foo-v2 update (the fake client fails it) and expects 2 for
     # foo-v2 only because its replicas were bumped before the failure; the targets
     # computed by scale() are these.
     {"foo-v3": 2, "foo-v2": 2, "foo-v1": 1}, {"foo-v2": 3}, {}),
    ("deployment with surge pods", (20, 2), (10, 2), ("foo-v2", 6, NEW_TS),
     [("foo-v1", 6, OLD_TS)], {"foo-v2": 11, "foo-v1": 11}, {}, {}),
    ("change both surge and size", (50, 6), (10, 3), ("foo-v2", 5, NEW_TS),
     [("foo-v1", 8, OLD_TS)], {"foo-v2": 22, "foo-v1": 34}, {}, {}),
    ("change both size and template", (14, 0), (10, 0), None,
     [("foo-v2", 7, NEW_TS), ("foo-v1", 3, OLD_TS)], {"foo-v2": 10, "foo-v1": 4}, {},
     {"template_changed": True}),
    ("saturated but broken new replica set does not affect old pods", (2, 1, 1), (2, 1, 1),
     ("foo-v2", 2, NEW_TS), [("foo-v1", 1, OLD_TS)], {"foo-v2": 2, "foo-v1": 1}, {},
     {"new_available": 0}),
]


def _annotate(rs: dict[str, Any], desired: int, maximum: int) -> None:
    rs["metadata"].setdefault("annotations", {}).update({
        DESIRED_REPLICAS_ANNOTATION: str(desired), MAX_REPLICAS_ANNOTATION: str(maximum)})


@pytest.mark.parametrize("case", SCALE_CASES, ids=[c[0] for c in SCALE_CASES])
def test_scale(case):
    _, new_d, old_d, new_rs, old_rss, expected, desired_annotations, extra = case
    deployment = scale_deployment(*new_d)
    old_deployment = scale_deployment(*old_d)
    if extra.get("template_changed"):
        # updatedTemplate(): the Deployment's template differs from every ReplicaSet's.
        deployment["spec"]["template"]["metadata"]["labels"]["another"] = "label"
    replicasets = []
    specs = ([(*new_rs, NEW_IMAGE)] if new_rs else []) + [(*o, OLD_IMAGE) for o in old_rss]
    for name, size, created, image in specs:
        rs = f.replicaset(name, "default", size, owner=deployment, created=created,
                          image=image, pod_hash=name)
        desired = desired_annotations.get(name, old_deployment["spec"]["replicas"])
        _annotate(rs, desired, desired + max_surge(old_deployment))
        replicasets.append(rs)
    if "new_available" in extra:
        replicasets[0]["status"]["availableReplicas"] = extra["new_available"]
    # scale() reads the new spec.replicas and the old status.replicas.
    deployment["status"]["replicas"] = old_deployment["spec"]["replicas"]
    deployment["spec"]["replicas"] = old_deployment["spec"]["replicas"]
    targets = replicaset_targets(deployment, replicasets, new_d[0])
    sizes = {rs["metadata"]["name"]: targets.get(rs["metadata"]["name"], rs["spec"]["replicas"])
             for rs in replicasets}
    assert sizes == expected


def test_saturated_new_replicaset_scales_old_ones_to_zero():
    # IsSaturated (TestAnnotationUtils): replicas, desired annotation and available
    # replicas all equal the Deployment's; then scale() drains every active old RS.
    deployment = scale_deployment(3, 1, 0)
    new = f.replicaset("foo-new", "default", 3, owner=deployment, created=NEW_TS,
                       image=NEW_IMAGE, pod_hash="new")
    old = f.replicaset("foo-old", "default", 2, owner=deployment, created=OLD_TS,
                       image=OLD_IMAGE, pod_hash="old")
    _annotate(new, 3, 4)
    _annotate(old, 3, 4)
    assert replicaset_targets(deployment, [new, old], 3) == {"foo-old": 0}
    # Not saturated: proportional scaling instead. allowed 3+1, total 5, toAdd -1; both
    # fractions round to 0, so the leftover -1 lands on the largest RS (foo-new).
    new["status"]["availableReplicas"] = 2
    assert replicaset_targets(deployment, [new, old], 3) == {"foo-new": 2, "foo-old": 2}
    new["status"]["availableReplicas"] = 3
    new["metadata"]["annotations"][DESIRED_REPLICAS_ANNOTATION] = "+3"  # ParseUint rejects
    assert replicaset_targets(deployment, [new, old], 3) == {"foo-new": 2, "foo-old": 2}


def test_recreate_rollout_is_not_scaled_proportionally():
    deployment = f.deployment("foo", "default", 4, strategy="Recreate")
    new = f.replicaset("foo-new", "default", 2, owner=deployment, created=NEW_TS,
                       pod_hash="new")
    old = f.replicaset("foo-old", "default", 2, owner=deployment, created=OLD_TS,
                       image=OLD_IMAGE, pod_hash="old")
    notes: list[str] = []
    assert replicaset_targets(deployment, [new, old], 2, notes) == {}
    assert notes and "Recreate" in notes[0]
