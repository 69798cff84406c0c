"""Rollouts: every order in which sibling ReplicaSets sync, judged on the worst case.

The Deployment controller splits a scale-down between its ReplicaSets; each ReplicaSet
controller then ranks its pods with rule 5 counting only the still-active pods of the
whole Deployment, so a sibling that syncs first changes the ranks
(webhook/core/deployment/sync_orders.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import factories as f
from tests.support.brute import tie_breaks
from webhook.core.deployment.deployment_util import MAX_REPLICAS_ANNOTATION
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.replicaset.replicaset_sync import predict_deletions
from webhook.core.scale.predict import predict_scale
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-02-01T00:00:00Z")
POLICY = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                                 {"name": "hybrid", "deletionCost": -100}]})
NODES = [f.node("inf-1", "inference"), f.node("inf-2", "inference"),
         f.node("hyb-1", "hybrid"), f.node("hyb-2", "hybrid")]


def rollout(old_nodes: list[str], new_nodes: list[str], replicas: int | None = None,
            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Deployment mid-rollout: ReplicaSet `old` and `new` with pods on the given nodes.

    No pod has a deletion cost yet (pods that predate poolguard, or a reconciler that has
    not run), so rule 5, the related pods per node, decides between pools.
    """
    total = len(old_nodes) + len(new_nodes)
    deployment = f.deployment("web", replicas=total if replicas is None else replicas,
                              max_surge=0, max_unavailable=1)
    old = f.replicaset("web-old", replicas=len(old_nodes), owner=deployment,
                       image="example/serve:0", pod_hash="old", created="2026-01-01T00:00:00Z",
                       annotations={MAX_REPLICAS_ANNOTATION: str(total)})
    new = f.replicaset("web-new", replicas=len(new_nodes), owner=deployment, pod_hash="new",
                       created="2026-01-02T00:00:00Z",
                       annotations={MAX_REPLICAS_ANNOTATION: str(total)})
    pods = [f.pod(f"old-{i}", owner=old, node_name=n, ready_time=f"2026-01-01T00:00:{i:02d}Z")
            for i, n in enumerate(old_nodes)]
    pods += [f.pod(f"new-{i}", owner=new, node_name=n, ready_time=f"2026-01-02T00:00:{i:02d}Z")
             for i, n in enumerate(new_nodes)]
    return deployment, [deployment, old, new, *NODES, *pods]


def test_a_sibling_syncing_first_can_make_a_protected_pod_go():
    # old: old-0 on inf-1 (with new-0: rank 2), old-1 on hyb-1 (with new-1, new-2: rank 3).
    # Scaling 5 -> 2 takes old 2 -> 1 and new 3 -> 1. From the state before the scale,
    # old deletes old-1 (hyb-1 ranks higher) and new deletes new-1 and new-2. But if new
    # syncs first, hyb-1 drops to rank 1 and old then deletes old-0, a protected pod,
    # while old-1 on the hybrid pool survives.
    deployment, objects = rollout(["inf-1", "hyb-1"], ["inf-1", "hyb-1", "hyb-1"])
    view = Snapshot(objects)
    result = assess_scale(view, POLICY, deployment, 2, NOW)
    prediction = result.prediction
    assert prediction.child_targets == {"web-old": (2, 1), "web-new": (3, 1)}
    assert sorted(p.name for p in prediction.victims) == ["new-1", "new-2", "old-1"]
    assert "old-0" in {p.name for p in prediction.possible_victims}
    verdict = result.verdict
    assert not verdict.allowed
    (violation, *_) = verdict.violations
    assert violation.rule == "protectedLast"
    assert violation.message.startswith("may delete protected-pool pod")
    assert "old-0 (node inf-1, pool inference)" in violation.message


def test_the_same_pods_ranked_from_the_state_before_the_scale_look_safe():
    # The single-state prediction the model widens: each ReplicaSet alone, nothing deleted.
    _, objects = rollout(["inf-1", "hyb-1"], ["inf-1", "hyb-1", "hyb-1"])
    view = Snapshot(objects)
    pods = view.pods("ml")
    old_pods = [p for p in pods if p["metadata"]["name"].startswith("old-")]
    deletion = predict_deletions(old_pods, pods, 1, NOW)
    assert [p.name for p in deletion.victims] == ["old-1"] and not deletion.tie_groups


def test_with_pool_costs_in_place_no_sync_order_reaches_the_protected_pool():
    deployment, objects = rollout(["inf-1", "hyb-1"], ["inf-1", "hyb-1", "hyb-1"])
    for obj in objects:
        if obj["kind"] == "Pod":
            cost = "1000" if obj["spec"]["nodeName"].startswith("inf") else "-100"
            obj["metadata"]["annotations"] = {f.COST_KEY: cost}
    result = assess_scale(Snapshot(objects), POLICY, deployment, 2, NOW)
    assert result.verdict.allowed and not result.verdict.violations
    assert result.prediction.possible_victims == []


def test_one_replicaset_deleting_keeps_the_single_state_prediction():
    # Only the new ReplicaSet shrinks (the old one already has none to spare): no sibling
    # deletion can change a rank, so nothing becomes uncertain.
    deployment, objects = rollout(["inf-1"], ["inf-2", "hyb-1", "hyb-1"], replicas=4)
    result = predict_scale(Snapshot(objects), deployment, 3, NOW)
    deleting = {rs for rs, (before, after) in result.child_targets.items() if after < before}
    assert deleting == {"web-new"}
    # The two pods on hyb-1 tie with each other; inf-2 (rank 1) stays out of it.
    assert {p.node_name for p in result.victims + result.possible_victims} == {"hyb-1"}


# --- the model against a brute force over every sync order ---------------------------


def _every_order_victims(objects: list[dict[str, Any]], targets: Mapping[str, tuple[int, int]],
                         ) -> list[frozenset[str]]:
    """The victim sets of every order of the ReplicaSets' syncs deletes, by brute force.

    Each ReplicaSet syncs once and deletes its whole share from one ranking. When it
    syncs, the siblings that synced before it have issued their deletions, and its
    informer may have seen any subset of them (they arrive one by one). Ties on rules
    1-5 across the cut are broken every possible way.
    """
    pods = [o for o in objects if o["kind"] == "Pod"]
    by_rs = {rs: [p for p in pods if p["metadata"]["name"].startswith(rs.split("-")[1])]
             for rs in targets}
    share = {rs: before - after for rs, (before, after) in targets.items() if before > after}
    outcomes: list[frozenset[str]] = []

    def explore(deleted: frozenset[str], synced: frozenset[str]) -> None:
        if len(synced) == len(share):
            outcomes.append(deleted)
        for rs in share:
            if rs in synced:
                continue
            for size in range(len(deleted) + 1):
                for observed in itertools.combinations(sorted(deleted), size):
                    active = [p for p in pods if p["metadata"]["name"] not in observed]
                    deletion = predict_deletions(by_rs[rs], active, len(by_rs[rs]) - share[rs],
                                                 NOW)
                    for victims in tie_breaks(deletion):
                        explore(deleted | victims, synced | {rs})

    explore(frozenset(), frozenset())
    return outcomes


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["inf-1", "inf-2", "hyb-1", "hyb-2"]), min_size=1, max_size=4),
       st.lists(st.sampled_from(["inf-1", "inf-2", "hyb-1", "hyb-2"]), min_size=1, max_size=4),
       st.integers(min_value=0, max_value=7))
def test_the_model_covers_every_sync_order(old, new, to):
    deployment, objects = rollout(old, new)
    to = min(to, len(old) + len(new) - 1)
    prediction = predict_scale(Snapshot(objects), deployment, to, NOW)
    reported = {p.name for p in itertools.chain(prediction.victims, prediction.possible_victims)}
    uncertain = {p.name for group in prediction.tie_groups for p in group.members}
    certain = {p.name for p in prediction.victims} - uncertain
    outcomes = _every_order_victims(objects, prediction.child_targets)
    assert frozenset(p.name for p in prediction.victims) in outcomes  # the predicted order
    for victims in outcomes:
        assert victims <= reported  # every pod any order deletes is reported
        assert certain <= victims  # and a pod called certain goes in every order
