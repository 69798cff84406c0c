"""The live rebalancer against the fake API server, the test acting as the controllers.

The cluster is examples/rebalance-state.yaml (two llm-serve pods on gpu-hyb-1 whose home
is the inference pool, room for them on gpu-inf-2). Each `tick` is called by the test,
with a clock it moves, so nothing waits on time. After an eviction the test plays the
ReplicaSet controller and the scheduler: it creates the replacement where the scenario
says and marks it Ready.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import replace as replace_options
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_rbac import used_permissions
from tests.support import factories as f
from tests.support.chart import kustomized
from tests.support.kubeapi.helpers import items_of, wait_until
from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.reconcilers import FAST, client_for, running
from webhook.cli.main import main
from webhook.cluster.kubeclient import api_client_from
from webhook.cluster.listing import read_snapshot
from webhook.core.kinds.registry import KINDS
from webhook.core.policy.policy import parse_policy
from webhook.reconciler.metrics import Metrics
from webhook.reconciler.rebalancer import TAINT_KEY, Rebalancer, RebalanceSettings

REPO = Path(__file__).resolve().parents[2]
STATE = REPO / "examples" / "rebalance-state.yaml"
POLICY_TEXT = ("pools:\n- {name: inference, deletionCost: 1000, protected: true}\n"
               "- {name: hybrid, deletionCost: -100}\nrebalance: {enabled: true}\n")
POLICY = parse_policy(yaml.safe_load(POLICY_TEXT))
MOVING = ["llm-serve-7d9f8c-ex4k", "llm-serve-7d9f8c-fx5k"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeKubeAPI, Any]]:
    with FakeKubeAPI() as api:
        api.put(*items_of(yaml.safe_load_all(STATE.read_text())))
        client = api_client_from(str(api.write_kubeconfig(tmp_path / "kubeconfig")))
        yield api, client
        client.close()


def rebalancer(client: Any, clock: Clock, metrics: Metrics, **settings: float) -> Rebalancer:
    return Rebalancer(client, lambda: read_snapshot(client), metrics,
                      RebalanceSettings(**settings), clock)


def taints(api: FakeKubeAPI, node: str) -> list[dict[str, Any]]:
    return (api.get("Node", "", node).get("spec") or {}).get("taints") or []


def evictions(api: FakeKubeAPI) -> list[str]:
    return [r.path.split("/")[-2] for r in api.requests
            if r.method == "POST" and r.path.endswith("/eviction") and r.status == 201]


def replace(api: FakeKubeAPI, evicted: str, node: str, name: str) -> None:
    """The ReplicaSet controller's replacement, bound by the scheduler to `node`, Ready."""
    original = next(p for p in items_of(yaml.safe_load_all(STATE.read_text()))
                    if p["metadata"]["name"] == evicted)
    pod = copy.deepcopy(original)
    pod["metadata"] = {**pod["metadata"], "name": name, "uid": f.uid_for(name)}
    pod["metadata"].pop("resourceVersion", None)
    pod["spec"]["nodeName"] = node
    api.put(pod)


def moves(metrics: Metrics) -> dict[str, float]:
    text = metrics.render()[0].decode()
    found = {}
    for line in text.splitlines():
        if line.startswith("poolguard_rebalance_moves_total{"):
            found[line.split('"')[1]] = float(line.split()[-1])
        if line.startswith("poolguard_rebalance_bounces_total "):
            found["bounces"] = float(line.split()[-1])
    return {k: v for k, v in found.items() if v}


def test_it_evicts_what_the_dry_run_listed_one_at_a_time_and_frees_the_node(
        cluster, tmp_path, capsys) -> None:
    api, client = cluster
    (tmp_path / "policy.yaml").write_text(POLICY_TEXT)
    kubeconfig = tmp_path / "kubeconfig"
    assert main(["rebalance", "--kubeconfig", str(kubeconfig), "--policy",
                 str(tmp_path / "policy.yaml"), "--dry-run", "-o", "json"]) == 0
    dry_run = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in dry_run["moves"]] == MOVING
    clock, metrics = Clock(), Metrics()
    live = rebalancer(client, clock, metrics, moves_per_minute=6)
    live.tick(POLICY)  # plans and taints the node it empties
    assert taints(api, "gpu-hyb-1") == [{"key": TAINT_KEY, "effect": "NoSchedule"}]
    assert evictions(api) == []
    live.tick(POLICY)
    assert evictions(api) == MOVING[:1]
    live.tick(POLICY)  # one pod of a workload in flight: nothing more until it is back
    assert evictions(api) == MOVING[:1]
    replace(api, MOVING[0], "gpu-inf-2", "llm-serve-7d9f8c-new1")
    live.tick(POLICY)  # landed at home; the budget (6 a minute) has no token yet
    assert evictions(api) == MOVING[:1]
    clock.now += 10
    live.tick(POLICY)
    assert evictions(api) == MOVING
    replace(api, MOVING[1], "gpu-inf-2", "llm-serve-7d9f8c-new2")
    live.tick(POLICY)
    assert taints(api, "gpu-hyb-1") == [] and live.batch is None
    assert moves(metrics) == {"evicted": 2, "landed": 2}
    assert [m["name"] for m in json.loads(_dry_run(kubeconfig, tmp_path, capsys))["moves"]] \
        == []


def _dry_run(kubeconfig: Path, tmp_path: Path, capsys) -> str:
    assert main(["rebalance", "--kubeconfig", str(kubeconfig), "--policy",
                 str(tmp_path / "policy.yaml"), "--dry-run", "-o", "json"]) == 0
    return capsys.readouterr().out


def test_a_replacement_that_bounces_abandons_the_node_and_holds_the_workload(cluster) -> None:
    api, client = cluster
    clock, metrics = Clock(), Metrics()
    live = rebalancer(client, clock, metrics, hold_back=600)
    live.tick(POLICY)
    live.tick(POLICY)
    replace(api, MOVING[0], "gpu-hyb-4", "llm-serve-7d9f8c-new1")  # not at home
    live.tick(POLICY)
    assert moves(metrics) == {"evicted": 1, "bounced": 1, "abandoned": 1, "bounces": 1}
    assert taints(api, "gpu-hyb-1") == [] and live.batch is None
    live.tick(POLICY)  # held back: the next plan leaves llm-serve alone
    assert live.batch is None and evictions(api) == MOVING[:1]
    clock.now += 601
    live.tick(POLICY)  # the hold is over: gpu-hyb-1 (one pod left there) is planned again
    assert live.batch is not None and live.batch.nodes == {"gpu-hyb-1"}


def test_a_budget_that_allows_no_disruption_is_a_wait(cluster) -> None:
    api, client = cluster
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "llm-serve", "namespace": "ml"},
           "spec": {"selector": {"matchLabels": {"app": "llm-serve"}}, "maxUnavailable": 1},
           "status": {"disruptionsAllowed": 0}}
    api.put(pdb)
    clock, metrics = Clock(), Metrics()
    live = rebalancer(client, clock, metrics)
    live.tick(POLICY)
    live.tick(POLICY)
    assert evictions(api) == [] and moves(metrics) == {"blocked": 1}
    assert api.get("Pod", "ml", MOVING[0]) is not None
    assert taints(api, "gpu-hyb-1") != []  # still emptying: the budget said wait
    api.put({**pdb, "status": {"disruptionsAllowed": 1}})
    clock.now += 10
    live.tick(POLICY)
    assert evictions(api) == MOVING[:1]


def test_a_refused_eviction_is_logged_with_the_budget_that_refused_it(
        cluster, caplog: pytest.LogCaptureFixture) -> None:
    api, client = cluster
    api.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": "llm-serve-budget", "namespace": "ml"},
             "spec": {"selector": {"matchLabels": {"app": "llm-serve"}}, "minAvailable": 7},
             "status": {"disruptionsAllowed": 0}})
    live = rebalancer(client, Clock(), Metrics())
    caplog.set_level("INFO", logger="poolguard.rebalancer")
    live.tick(POLICY)
    live.tick(POLICY)
    refused = [r.getMessage() for r in caplog.records if "will retry" in r.getMessage()]
    assert len(refused) == 1, caplog.text
    assert f"evicting ml/{MOVING[0]}" in refused[0]
    assert "would violate the pod's disruption budget" in refused[0]
    assert "The disruption budget llm-serve-budget needs more healthy pods" in refused[0]


def test_a_batch_a_budget_keeps_from_emptying_is_abandoned_in_time(cluster) -> None:
    api, client = cluster
    api.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": "llm-serve", "namespace": "ml"},
             "spec": {"selector": {"matchLabels": {"app": "llm-serve"}}, "minAvailable": 7},
             "status": {"disruptionsAllowed": 0}})
    clock, metrics = Clock(), Metrics()
    live = rebalancer(client, clock, metrics, batch_timeout=900)
    live.tick(POLICY)
    for _ in range(3):
        clock.now += 300
        live.tick(POLICY)
    assert live.batch is not None and taints(api, "gpu-hyb-1") != []
    clock.now += 1
    live.tick(POLICY)
    assert live.batch is None and taints(api, "gpu-hyb-1") == []
    assert moves(metrics) == {"blocked": 3, "abandoned": 2}


def test_a_move_that_never_lands_is_abandoned_and_its_taint_removed(cluster) -> None:
    api, client = cluster
    clock, metrics = Clock(), Metrics()
    live = rebalancer(client, clock, metrics, move_timeout=300)
    live.tick(POLICY)
    live.tick(POLICY)
    clock.now += 301
    live.tick(POLICY)
    assert live.batch is None and taints(api, "gpu-hyb-1") == []
    assert moves(metrics) == {"evicted": 1, "timeout": 1, "abandoned": 1}


def test_a_new_leader_removes_the_taints_a_former_one_left(cluster) -> None:
    api, client = cluster
    node = api.get("Node", "", "gpu-hyb-2")
    node["spec"] = {"taints": [{"key": TAINT_KEY, "effect": "NoSchedule"},
                               {"key": "gpu", "value": "a100", "effect": "NoSchedule"}]}
    api.put(node)
    rebalancer(client, Clock(), Metrics()).reset()
    assert taints(api, "gpu-hyb-2") == [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]


def test_it_calls_exactly_what_the_reconciler_and_rebalancer_roles_grant(cluster) -> None:
    api, client = cluster
    for kind in KINDS:  # with their CRDs, the custom kinds are listed too
        if kind.custom:
            api.install_crd(kind.kind)
    node = api.get("Node", "", "gpu-hyb-2")
    node["spec"] = {"taints": [{"key": TAINT_KEY, "effect": "NoSchedule"}]}
    api.put(node)
    live = rebalancer(client, Clock(), Metrics())
    live.reset()
    live.tick(POLICY)
    live.tick(POLICY)
    assert evictions(api) == MOVING[:1]
    used = used_permissions(api.requests)
    roles = {o["metadata"]["name"]: o for o in kustomized("rebalance")
             if o["kind"] == "ClusterRole"}
    reconciler, rebalancer_role = (
        {(group, resource, verb) for rule in roles[name]["rules"]
         for group in rule["apiGroups"] for resource in rule["resources"]
         for verb in rule["verbs"]}
        for name in ("poolguard-reconciler", "poolguard-rebalancer"))
    assert used <= reconciler | rebalancer_role
    assert used - reconciler == rebalancer_role


def test_the_reconciler_service_rebalances_while_it_leads_and_cleans_up(
        cluster, tmp_path: Path) -> None:
    api, _ = cluster
    node = api.get("Node", "", "gpu-hyb-2")
    node["spec"] = {"taints": [{"key": TAINT_KEY, "effect": "NoSchedule"}]}
    api.put(node)  # left by a former leader
    client = client_for(str(tmp_path / "kubeconfig"), "a")
    options = replace_options(FAST, rebalance_interval=0.05, rebalance_moves_per_minute=600)
    with running(client, POLICY, options) as service:
        wait_until(lambda: evictions(api) == MOVING[:1], message="the first eviction")
        assert taints(api, "gpu-hyb-2") == []
        assert taints(api, "gpu-hyb-1") == [{"key": TAINT_KEY, "effect": "NoSchedule"}]
        assert service.rebalancer is not None and service.rebalancer.batch is not None
    assert taints(api, "gpu-hyb-1") == []  # a stopping leader abandons its batch


def test_a_rollout_that_began_after_the_plan_is_waited_for(cluster) -> None:
    api, client = cluster
    clock, metrics = Clock(), Metrics()
    live = rebalancer(client, clock, metrics)
    live.tick(POLICY)  # the batch is planned while llm-serve is settled
    api.modify("Deployment", "ml", "llm-serve",
               lambda d: d["status"].update({"updatedReplicas": 3}))
    live.tick(POLICY)
    assert evictions(api) == [] and live.batch is not None
    api.modify("Deployment", "ml", "llm-serve",
               lambda d: d["status"].update({"updatedReplicas": 7}))
    live.tick(POLICY)
    assert evictions(api) == MOVING[:1]


def test_without_its_taint_a_node_is_not_emptied(cluster) -> None:
    api, client = cluster
    api.fail(403, count=1, method="PATCH", path_contains="/nodes/")  # no RBAC to patch
    clock, metrics = Clock(), Metrics()
    live = rebalancer(client, clock, metrics)
    live.tick(POLICY)
    assert live.batch is None and taints(api, "gpu-hyb-1") == []
    live.tick(POLICY)  # planned again, tainted this time
    assert live.batch is not None and evictions(api) == []
    live.tick(POLICY)
    assert evictions(api) == MOVING[:1]


def test_a_rebalancer_that_lost_the_lease_writes_nothing(cluster) -> None:
    api, client = cluster
    leading = [True]
    live = Rebalancer(client, lambda: read_snapshot(client), Metrics(), RebalanceSettings(),
                      Clock(), may_write=lambda: leading[0])
    live.tick(POLICY)
    assert taints(api, "gpu-hyb-1") != []
    leading[0] = False
    live.tick(POLICY)
    assert evictions(api) == []
    live.forget()
    assert live.batch is None and taints(api, "gpu-hyb-1") != []  # the next leader's reset
