"""Cost decisions and the JSON Patch that applies them without losing anything."""

from __future__ import annotations

import copy

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import factories as f
from webhook.core.cost.mutation import (
    KEEP,
    SET,
    UNCHANGED,
    UNKNOWN_POOL,
    annotation_patch,
    decide_cost,
    is_governed,
    pinned_pool,
)
from webhook.core.objects.deletion_cost import (
    DELETION_COST_ANNOTATION,
    MANAGED_COST_ANNOTATION,
    POOL_ANNOTATION,
)
from webhook.core.policy.policy import default_policy, parse_policy

POLICY = default_policy()


def test_decisions():
    assert decide_cost(POLICY, {}, "inference").action == SET
    assert decide_cost(POLICY, {}, "inference").annotations == {
        DELETION_COST_ANNOTATION: "1000", MANAGED_COST_ANNOTATION: "1000",
        POOL_ANNOTATION: "inference"}
    assert decide_cost(POLICY, {}, None).cost == 0  # unlabelled node: the default cost
    assert decide_cost(POLICY, {}, "x", pool_known=False).action == UNKNOWN_POOL
    by_hand = {DELETION_COST_ANNOTATION: "7"}
    assert decide_cost(POLICY, by_hand, "inference").action == KEEP
    edited = {DELETION_COST_ANNOTATION: "7", MANAGED_COST_ANNOTATION: "1000"}
    assert decide_cost(POLICY, edited, "inference").action == KEEP
    ours = decide_cost(POLICY, {}, "inference").annotations
    assert decide_cost(POLICY, ours, "inference").action == UNCHANGED
    assert decide_cost(POLICY, ours, "hybrid").action == SET  # node moved pools: stale


def test_patch_adds_the_map_when_absent_and_escapes_keys():
    pod = f.pod("p")
    wanted = decide_cost(POLICY, {}, "hybrid").annotations
    ops = annotation_patch(pod, wanted)
    assert ops == [{"op": "add", "path": "/metadata/annotations", "value": wanted}]
    pod["metadata"]["annotations"] = {"a/b~c": "keep"}
    ops = annotation_patch(pod, wanted)
    assert {op["path"] for op in ops} == {
        "/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost",
        "/metadata/annotations/poolguard.dev~1managed-deletion-cost",
        "/metadata/annotations/poolguard.dev~1pool"}
    patched = jsonpatch.apply_patch(pod, ops)
    assert patched["metadata"]["annotations"]["a/b~c"] == "keep"


def test_pinned_pool():
    pod = f.pod("p", node_name=None)
    assert pinned_pool(POLICY, pod) is None
    pod["spec"]["nodeSelector"] = {"node.usage": "inference"}
    assert pinned_pool(POLICY, pod) == "inference"
    term = {"matchExpressions": [{"key": "node.usage", "operator": "In", "values": ["hybrid"]}]}
    pod["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    assert pinned_pool(POLICY, pod) is None  # contradicts the nodeSelector
    del pod["spec"]["nodeSelector"]
    assert pinned_pool(POLICY, pod) == "hybrid"
    other = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"].append(other)
    assert pinned_pool(POLICY, pod) is None  # ORed terms: the second allows any pool
    term["matchExpressions"][0]["values"] = ["hybrid", "inference"]
    assert pinned_pool(POLICY, pod) is None


def test_governed_selectors():
    scoped = parse_policy({"pools": [{"name": "a", "deletionCost": 1}],
                           "namespaceSelector": {"matchLabels": {"team": "ml"}},
                           "podSelector": {"matchExpressions": [
                               {"key": "tier", "operator": "NotIn", "values": ["batch"]}]}})
    assert is_governed(scoped, {"team": "ml"}, {"tier": "online"})
    assert is_governed(scoped, {"team": "ml"}, {})
    assert not is_governed(scoped, {"team": "ml"}, {"tier": "batch"})
    assert not is_governed(scoped, {}, {})  # a namespace without labels
    assert is_governed(POLICY, {}, {})  # empty selectors select everything


# annotation keys, with JSON Pointer's special characters '/' and '~' over-represented
keys = st.text(st.sampled_from("ab/~01.-") | st.characters(blacklist_categories=("Cs",)),
               min_size=1, max_size=20) | st.sampled_from([
                   "controller.kubernetes.io/pod-deletion-cost", "poolguard.dev/pool",
                   "~1", "~0", "a/b~c", "/", "~"])
values = st.text(max_size=20)


@settings(max_examples=200, deadline=None)
@given(annotations=st.one_of(st.none(), st.dictionaries(keys, values, max_size=6)),
       labels=st.dictionaries(keys, values, max_size=3),
       pool=st.sampled_from(["inference", "hybrid", "training", None]))
def test_patch_loses_nothing_and_is_idempotent(annotations, labels, pool):
    pod = f.pod("p", labels=labels)
    if annotations is not None:
        pod["metadata"]["annotations"] = annotations
    original = copy.deepcopy(pod)
    decision = decide_cost(POLICY, (annotations or {}), pool)
    if decision.action != SET:
        return
    patched = jsonpatch.apply_patch(pod, annotation_patch(pod, decision.annotations))
    assert pod == original  # the input is not modified
    after = patched["metadata"].pop("annotations")
    before = original["metadata"].pop("annotations", None) or {}
    assert patched == original  # nothing but annotations changed
    assert {k: v for k, v in after.items() if k not in decision.annotations} == {
        k: v for k, v in before.items() if k not in decision.annotations}
    assert all(after[k] == v for k, v in decision.annotations.items())
    patched["metadata"]["annotations"] = after
    assert annotation_patch(patched, decision.annotations) == []  # reinvocation: no-op


def test_node_that_left_every_pool_drops_the_stale_pool_name():
    before = decide_cost(POLICY, {}, "inference").annotations
    pod = f.pod("p", annotations=dict(before))
    decision = decide_cost(POLICY, before, None)  # the node lost its pool label
    assert decision.action == SET and decision.cost == 0
    patched = jsonpatch.apply_patch(pod, annotation_patch(pod, decision.annotations,
                                                          decision.stale))
    assert patched["metadata"]["annotations"] == {DELETION_COST_ANNOTATION: "0",
                                                  MANAGED_COST_ANNOTATION: "0"}
    assert decide_cost(POLICY, patched["metadata"]["annotations"], None).action == UNCHANGED
