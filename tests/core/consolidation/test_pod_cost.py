"""`pod_cost`: the one cost decision both pod webhooks and the reconciler ask."""

from __future__ import annotations

from tests.support import factories as f
from tests.support.gpu_clusters import gpu_node, gpu_pod
from webhook.core.consolidation.pod_cost import pod_cost
from webhook.core.cost.mutation import KEEP, SET, UNKNOWN_POOL
from webhook.core.objects.deletion_cost import DELETION_COST_ANNOTATION
from webhook.core.policy.policy import default_policy
from webhook.core.view.snapshot import Snapshot

POLICY = default_policy()  # the hybrid pool consolidates: a pod's cost is its node's rank
HYBRID = POLICY.pool_by_name("hybrid")


def hybrid_node() -> tuple[dict, dict, list[dict]]:
    """A hybrid node running one pod of two, and the second pod about to bind there."""
    rs = f.replicaset("serve", replicas=2)
    bound, binding = gpu_pod("a", "hyb-1", 1, rs, 1), gpu_pod("b", "hyb-1", 1, rs, 2)
    unbound = {**binding, "spec": {**binding["spec"], "nodeName": None}}
    return gpu_node("hyb-1", "hybrid"), unbound, [bound, binding]


def test_a_pod_ranked_at_binding_gets_what_the_reconciler_gives_it_once_bound():
    node, unbound, pods = hybrid_node()
    at_binding = pod_cost(unbound, node, Snapshot([node, pods[0], unbound]), POLICY,
                          at_binding=True)
    reconciled = pod_cost(pods[1], node, Snapshot([node, *pods]), POLICY)
    assert at_binding is not None and reconciled is not None
    assert (at_binding.action, at_binding.pool) == (SET, "hybrid")
    assert at_binding.cost == reconciled.cost
    assert HYBRID.band.low <= at_binding.cost <= HYBRID.band.high


def test_without_a_view_of_the_node_the_pool_cost_applies():
    node, _, pods = hybrid_node()
    decision = pod_cost(pods[1], node, None, POLICY)
    assert decision is not None and (decision.action, decision.cost) == (SET, -100)


def test_an_unknown_node_sets_nothing_but_keeps_a_cost_set_by_hand():
    _, _, pods = hybrid_node()
    assert pod_cost(pods[1], None, None, POLICY).action == UNKNOWN_POOL
    by_hand = f.pod("p", node_name="gone", annotations={DELETION_COST_ANNOTATION: "5"})
    assert pod_cost(by_hand, None, None, POLICY).action == KEEP


def test_an_unscheduled_pod_gets_the_cost_of_the_pool_it_is_pinned_to():
    pinned = f.pod("p", node_name=None)
    assert pod_cost(pinned, None, None, POLICY) is None  # pinned to no pool
    pinned["spec"]["nodeSelector"] = {POLICY.pool_label: "inference"}
    decision = pod_cost(pinned, None, None, POLICY)
    assert decision is not None and (decision.action, decision.pool, decision.cost) == (
        SET, "inference", 1000)
