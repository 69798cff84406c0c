"""The rebalancer's RBAC is granted only where rebalancing is turned on, alike in the chart
(`policy.rebalance.enabled`) and the kustomize overlay `rebalance`."""

from __future__ import annotations

import pytest

from tests.support.chart import KUBECTL, _normalize, kinds, kustomized, render

REBALANCER = {("ClusterRole", "poolguard-rebalancer"),
              ("ClusterRoleBinding", "poolguard-rebalancer")}


def test_the_default_chart_grants_no_eviction_and_no_node_patch() -> None:
    objects = render()
    assert not kinds(objects) & REBALANCER
    for role in (o for o in objects if o["kind"] in ("ClusterRole", "Role")):
        for rule in role["rules"]:
            assert "pods/eviction" not in rule["resources"], role["metadata"]["name"]
            assert not ("nodes" in rule["resources"] and "patch" in rule["verbs"])


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (kubectl kustomize)")
def test_the_chart_with_rebalancing_on_grants_what_the_overlay_grants() -> None:
    chart = {(o["kind"], o["metadata"]["name"]): _normalize(o)
             for o in render(sets=("policy.rebalance.enabled=true",))}
    overlay = {(o["kind"], o["metadata"]["name"]): _normalize(o)
               for o in kustomized("rebalance")}
    assert not REBALANCER - set(chart) and not REBALANCER - set(overlay)
    for key in REBALANCER:
        assert chart[key] == overlay[key], key
    binding = overlay[("ClusterRoleBinding", "poolguard-rebalancer")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "poolguard-reconciler",
                                    "namespace": "poolguard"}]
    plain = {(o["kind"], o["metadata"]["name"]) for o in kustomized("self-signed")}
    assert set(overlay) - plain == REBALANCER
