"""calculateDiffsWithExpectation against upstream's own table (kruise v1.8.0,
pkg/controller/cloneset/sync/cloneset_sync_utils_test.go, all 80 rows)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from tests.core.cloneset.upstream_diffs import ROWS, Row
from webhook.core.cloneset.cloneset_pod import CloneSetPod
from webhook.core.cloneset.cloneset_spec import CloneSetSpec
from webhook.core.cloneset.expectation_diffs import (
    ExpectationDiffs,
    default_is_pod_update,
    expectation_diffs,
)
from webhook.core.objects.podfacts import PodFacts

STATES = {"": "Normal", "D": "PreparingDelete", "U": "PreparingUpdate", "X": "Updating"}


def row_pod(word: str) -> CloneSetPod:
    """createTestPod(revision, state, ready, specifiedDelete) from one word of a row."""
    revision = {"n": "new_rev", "o": "old_rev"}[word[0]]
    state = STATES["".join(c for c in word[1:] if c in "DUX")]
    labels = {"controller-revision-hash": revision, "lifecycle.apps.kruise.io/state": state}
    if "s" in word[1:]:
        labels["apps.kruise.io/specified-delete"] = "true"
    pod: dict[str, Any] = {"metadata": {"labels": labels}}
    if "r" in word[1:]:
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return CloneSetPod(PodFacts(pod))


def spec_of_row(row: Row) -> CloneSetSpec:
    return CloneSetSpec(
        replicas=row.replicas, partition_value=row.partition, max_surge_value=row.max_surge,
        max_unavailable_value=row.max_unavailable,
        scale_max_unavailable_value=row.scale_max_unavailable, paused=row.paused,
        exclude_preparing_delete=row.exclude_preparing_delete,
        partition_rollback=not row.no_rollback, preparing_update_as_update=True)


def camel(fields: dict[str, int]) -> dict[str, int]:
    """ExpectationDiffs' non-zero fields named as upstream names them."""
    def name(snake: str) -> str:
        head, *rest = snake.split("_")
        return head + "".join(word.title() for word in rest)
    return {name(k): v for k, v in fields.items() if v}


@pytest.mark.parametrize("row", ROWS, ids=[f"{i}-{row.name}" for i, row in enumerate(ROWS)])
def test_upstream_table(row: Row) -> None:
    spec = spec_of_row(row)
    pods = [row_pod(word) for word in row.pods.split()]
    current = "new_rev" if row.consistent else "old_rev"
    is_pod_update = default_is_pod_update(spec) if row.preparing_update_as_update else None
    diffs = expectation_diffs(spec, pods, current, "new_rev", is_pod_update, None)
    assert camel(asdict(diffs)) == {k: v for k, v in row.expected.items() if v}


def test_the_table_is_whole() -> None:
    """All of upstream's rows, and rows that exercise a scale-in at all."""
    assert len(ROWS) == 80
    assert sum(1 for row in ROWS if row.expected.get("scaleDownNum")) >= 10


def test_a_scale_in_counts_only_what_is_not_specified_to_delete() -> None:
    spec = CloneSetSpec(replicas=2)
    pods = [row_pod(w) for w in ("nrs", "nr", "nr", "nr", "nr")]
    assert expectation_diffs(spec, pods, "new_rev", "new_rev", None, None) == ExpectationDiffs(
        scale_down_num=2, scale_down_num_old_revision=0, delete_ready_limit=4)
