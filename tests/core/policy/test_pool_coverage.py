"""The policy checked against the nodes: each pool's nodes, and what names nothing."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from tests.support import factories as f
from webhook.cluster.state import EXAMPLE_POLICY, EXAMPLE_STATE, load_policy, load_state
from webhook.core.policy.policy import Policy, default_policy
from webhook.core.policy.policy_change import change_refusal
from webhook.core.policy.pool_coverage import (
    EMPTY_POOL,
    EMPTY_PROTECTED_POOL,
    NO_NODES,
    NO_POOL_LABEL,
    UNLISTED_VALUE,
    pool_coverage,
)

NODES = [f.node("inf-1", "inference"), f.node("inf-2", "inference"), f.node("hyb-1", "hybrid"),
         f.node("train-1", "training"), f.node("train-2", "training"), f.node("cpu-1")]


def renamed(policy: Policy, index: int, name: str) -> Policy:
    pools = list(policy.pools)
    pools[index] = replace(pools[index], name=name)
    return replace(policy, pools=tuple(pools))


def test_each_pool_lists_its_nodes_and_unlisted_values_are_counted():
    coverage = pool_coverage(default_policy(), NODES)
    assert coverage.nodes_by_pool == {"inference": ("inf-1", "inf-2"), "hybrid": ("hyb-1",)}
    assert coverage.unlisted_values == {"training": 2}
    assert coverage.unlabelled == 1
    assert not coverage.disarmed
    assert [(x.problem, x.message) for x in coverage.findings] == [
        (UNLISTED_VALUE, "2 nodes carry node.usage=training, which names no pool: their pods "
                         "get defaultDeletionCost 0")]


def test_a_pool_label_no_node_carries_names_the_labels_that_do():
    coverage = pool_coverage(replace(default_policy(), pool_label="node.pool"), NODES)
    assert coverage.disarmed
    [finding] = coverage.findings
    assert finding.problem == NO_POOL_LABEL
    assert finding.message == (
        "no node carries the pool label node.pool: every pod gets defaultDeletionCost 0 and "
        "no pod is on a protected pool; node labels whose values name pools: node.usage "
        "(hybrid on 1 node, inference on 2 nodes)")


def test_a_misspelt_protected_pool_is_named_with_the_value_its_nodes_carry():
    coverage = pool_coverage(renamed(default_policy(), 0, "inferense"), NODES)
    assert coverage.disarmed
    assert [x.problem for x in coverage.disarming] == [EMPTY_PROTECTED_POOL]
    assert coverage.disarming[0].message == (
        "protected pool 'inferense' has no node (no node carries node.usage=inferense), so "
        "nothing is protected there; 2 nodes carry 'inference', which names no pool: a typo?")
    assert {x.problem for x in coverage.findings} == {EMPTY_PROTECTED_POOL, UNLISTED_VALUE}


def test_an_unprotected_pool_without_nodes_is_a_warning_not_a_disarm():
    coverage = pool_coverage(default_policy(), [f.node("inf-1", "inference")])
    assert [(x.problem, x.disarms) for x in coverage.findings] == [(EMPTY_POOL, False)]


def test_no_nodes_cannot_be_judged():
    coverage = pool_coverage(default_policy(), [])
    assert [x.problem for x in coverage.findings] == [NO_NODES]
    assert not coverage.disarmed
    assert change_refusal(default_policy(), renamed(default_policy(), 0, "x"), []) is None


def test_the_example_policy_covers_the_example_state():
    coverage = pool_coverage(load_policy(EXAMPLE_POLICY), load_state(EXAMPLE_STATE).nodes())
    assert not coverage.disarmed
    assert all(coverage.nodes_by_pool.values())


def test_a_change_that_empties_a_protected_pool_is_refused():
    current = default_policy()
    assert "no node carries the pool label node.pool" in change_refusal(
        current, replace(current, pool_label="node.pool"), NODES)
    assert "protected pool 'inferense' has no node" in change_refusal(
        current, renamed(current, 0, "inferense"), NODES)
    # Changing a cost, or unprotecting nothing, passes.
    assert change_refusal(current, replace(current, default_deletion_cost=-5), NODES) is None


def test_a_change_that_keeps_a_problem_already_in_force_is_not_refused_for_it():
    broken = renamed(default_policy(), 0, "inferense")
    assert change_refusal(broken, replace(broken, default_deletion_cost=-5), NODES) is None
    assert change_refusal(broken, default_policy(), NODES) is None  # the fix


@given(st.lists(st.sampled_from(["inference", "hybrid", "training", None]), max_size=8))
def test_every_labelled_node_is_in_one_pool_or_one_unlisted_value(pools):
    nodes = [f.node(f"n{i}", pool) for i, pool in enumerate(pools)]
    coverage = pool_coverage(default_policy(), nodes)
    in_pools = sum(len(names) for names in coverage.nodes_by_pool.values())
    assert in_pools + sum(coverage.unlisted_values.values()) + coverage.unlabelled == len(nodes)
    # Disarmed exactly when there are nodes and no inference node among them.
    assert coverage.disarmed == (bool(nodes) and "inference" not in pools)
