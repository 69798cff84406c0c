"""How many pods a CloneSet sync creates, deletes and updates: `calculateDiffsWithExpectation`.

Source: github.com/openkruise/kruise v1.8.0,
pkg/controller/cloneset/sync/cloneset_sync_utils.go (`calculateDiffsWithExpectation`,
`isSpecifiedDelete`, `shouldScalingExcludePreparingDelete`). The fields and their
arithmetic are upstream's, name for name; `tests/core/cloneset` runs upstream's own table
(`TestCalculateDiffsWithExpectation`) against it.

What a scale-in reads from it: `scale_down_num` (pods beyond `replicas` plus the surge in
use, not counting the pods already specified to delete), `scale_down_num_old_revision`
(how many of those come from the current revision's pods, beyond the partition), and
`delete_ready_limit`: `updateStrategy.maxUnavailable + (pods - replicas) - unavailable`,
the number of ready pods one sync may delete (`scaleStrategy.maxUnavailable` limits only
scale-ups).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .cloneset_pod import PREPARING_DELETE, PREPARING_UPDATE, CloneSetPod
from .cloneset_spec import CloneSetSpec


@dataclass(frozen=True)
class ExpectationDiffs:
    """`expectationDiffs`: every field non-negative except `update_num` (see upstream)."""

    scale_up_num: int = 0
    scale_up_num_old_revision: int = 0
    scale_down_num: int = 0
    scale_down_num_old_revision: int = 0
    scale_up_limit: int = 0
    delete_ready_limit: int = 0
    use_surge: int = 0
    use_surge_old_revision: int = 0
    update_num: int = 0
    update_max_unavailable: int = 0


def is_specified_delete(spec: CloneSetSpec, pod: CloneSetPod) -> bool:
    """The specified-delete label, or the pod's name in `scaleStrategy.podsToDelete`."""
    return pod.specified_delete or pod.name in spec.pods_to_delete


def default_is_pod_update(spec: CloneSetSpec) -> Callable[[CloneSetPod, str], bool]:
    """`revision.IsPodUpdate`, what `Scale` passes: with the gate PreparingUpdateAsUpdate
    a PreparingUpdate pod counts as updated."""
    def is_pod_update(pod: CloneSetPod, update_revision: str) -> bool:
        if spec.preparing_update_as_update and pod.lifecycle == PREPARING_UPDATE:
            return True
        return pod.of_revision(update_revision)
    return is_pod_update


def expectation_diffs(spec: CloneSetSpec, pods: Sequence[CloneSetPod],
                      current_revision: str, update_revision: str,
                      is_pod_update: Callable[[CloneSetPod, str], bool] | None,
                      now_ns: int | None) -> ExpectationDiffs:
    """calculateDiffsWithExpectation; `is_pod_update` None is upstream's nil (the hash alone)."""
    replicas = spec.replicas
    partition, max_surge = spec.partition, spec.max_surge
    max_unavailable, scale_max_unavailable = spec.max_unavailable, spec.scale_max_unavailable
    if is_pod_update is None:
        def is_pod_update(pod: CloneSetPod, revision: str) -> bool:
            return pod.of_revision(revision)

    new_count = new_active = old_count = old_active = 0
    unavailable_new = unavailable_old = to_delete_new = to_delete_old = 0
    pre_deleting_new = pre_deleting_old = 0
    for pod in pods:
        updated = is_pod_update(pod, update_revision)
        if pod.lifecycle == PREPARING_DELETE:
            if updated:
                pre_deleting_new += 1
            else:
                pre_deleting_old += 1
        elif is_specified_delete(spec, pod):
            if updated:
                to_delete_new += 1
            else:
                to_delete_old += 1
        elif not pod.available(spec.min_ready_seconds, now_ns):
            if updated:
                unavailable_new += 1
            else:
                unavailable_old += 1
        if updated:
            new_count += 1
            new_active += pod.lifecycle != PREPARING_DELETE
        else:
            old_count += 1
            old_active += pod.lifecycle != PREPARING_DELETE

    update_old_diff = old_active - partition
    update_new_diff = new_active - (replicas - partition)
    total_unavailable = pre_deleting_new + pre_deleting_old + unavailable_new + unavailable_old
    if update_revision == current_revision or not spec.partition_rollback:
        update_old_diff = max(update_old_diff, 0)
        update_new_diff = min(update_new_diff, 0)

    use_surge = use_surge_old = 0
    if max_surge > 0:
        scale_surge = scale_old_surge = 0
        to_delete = to_delete_new + to_delete_old
        if to_delete > 0:
            scale_surge = min(max(total_unavailable + to_delete - max_unavailable, 0), to_delete)
            if scale_surge > to_delete_new:
                scale_old_surge = scale_surge - to_delete_new
        update_surge = update_old_surge = 0
        if _plus_and_minus(update_old_diff, update_new_diff):
            if abs(update_old_diff) <= abs(update_new_diff):
                update_surge = abs(update_old_diff)
                if update_old_diff < 0:
                    update_old_surge = update_surge
            else:
                update_surge = abs(update_new_diff)
                if update_new_diff > 0:
                    update_old_surge = update_surge
        # the controller does not scale and update in one reconcile
        if scale_surge >= update_surge:
            use_surge = min(max_surge, scale_surge)
            use_surge_old = min(use_surge, scale_old_surge)
        else:
            use_surge = min(max_surge, update_surge)
            use_surge_old = min(use_surge, update_old_surge)

    total, total_old = len(pods), old_count
    if spec.exclude_preparing_delete:
        total -= pre_deleting_old + pre_deleting_new
        total_old -= pre_deleting_old
    expected_total = replicas + use_surge
    expected_old = partition + use_surge_old

    scale_up = scale_up_old = scale_up_limit = 0
    if expected_total - total > 0:
        scale_up = expected_total - total
        scale_up_old = max(expected_old - total_old, 0)
        scale_up_limit = min(scale_up, max(scale_max_unavailable - total_unavailable, 0))
    scale_down = scale_down_old = delete_ready_limit = 0
    if total - to_delete_old - to_delete_new - expected_total > 0:
        scale_down = total - to_delete_old - to_delete_new - expected_total
        scale_down_old = max(total_old - to_delete_old - expected_old, 0)
    if to_delete_new > 0 or to_delete_old > 0 or scale_down > 0:
        delete_ready_limit = max(max_unavailable + (len(pods) - replicas) - total_unavailable, 0)

    if abs(update_old_diff) <= abs(update_new_diff):
        update_num = update_old_diff
    else:
        update_num = -update_new_diff
    update_max_unavailable = max_unavailable + len(pods) - replicas if update_num else 0
    return ExpectationDiffs(scale_up, scale_up_old, scale_down, scale_down_old, scale_up_limit,
                            delete_ready_limit, use_surge, use_surge_old, update_num,
                            update_max_unavailable)


def _plus_and_minus(i: int, j: int) -> bool:
    """IsIntPlusAndMinus: one positive, the other negative."""
    return (i < 0 < j) or (i > 0 > j)
