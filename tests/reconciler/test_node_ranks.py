"""The running reconciler ranks a consolidating pool's pods by node, node by node.

Against the fake API server: pods arrive and leave, and the costs the reconciler leaves
are the ones the preview (`reconcile --state --dry-run --output json`) names for the same
state; a change on one node rewrites pods on that node only; a value a person set stays.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support import factories as f
from tests.support.gpu_clusters import gpu_node, gpu_pod
from tests.support.kubeapi.helpers import wait_until
from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.policies import FLAT_POLICY_FILE
from tests.support.reconcilers import FAST as FAST_OPTIONS
from tests.support.reconcilers import client_for, fake_api
from tests.support.reconcilers import running as run_service
from webhook.cli.main import main
from webhook.core.objects.deletion_cost import DELETION_COST_ANNOTATION as COST
from webhook.core.policy.policy import default_policy
from webhook.core.view.snapshot import Snapshot
from webhook.reconciler.preview import preview
from webhook.reconciler.service import Service

FAST = replace(FAST_OPTIONS, events=False)


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with fake_api(gpu_node("inf-1", "inference"), gpu_node("hyb-1", "hybrid"),
                  gpu_node("hyb-2", "hybrid"), gpu_node("hyb-3", "hybrid")) as server:
        yield server


def running(api: FakeKubeAPI, tmp_path: Path) -> contextlib.AbstractContextManager[Service]:
    """The service with the built-in policy (the hybrid pool consolidates)."""
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kc"))
    return run_service(client_for(kubeconfig, FAST.identity), default_policy(), FAST)


def wanted(api: FakeKubeAPI) -> dict[str, int | None]:
    """The costs the preview names for the fake server's state now."""
    view = Snapshot([*api.objects("Namespace"), *api.objects("Node"), *api.objects("Pod")])
    return {p["name"]: p["desiredCost"] for p in preview(view, default_policy(), ())["pods"]}


def carried(api: FakeKubeAPI) -> dict[str, int | None]:
    costs = {}
    for pod in api.objects("Pod"):
        value = (pod["metadata"].get("annotations") or {}).get(COST)
        costs[pod["metadata"]["name"]] = None if value is None else int(value)
    return costs


def test_ranks_follow_pods_node_by_node(api: FakeKubeAPI, tmp_path: Path) -> None:
    rs = f.replicaset("serve-abc", replicas=5)
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "ml", "uid": f.uid_for("job")},
           "spec": {"selector": {"matchLabels": {"job": "train"}}}}
    api.put(rs, gpu_pod("serve-0", "inf-1", 2, rs, 10), gpu_pod("serve-1", "hyb-1", 2, rs, 20),
            gpu_pod("serve-2", "hyb-2", 2, rs, 30), gpu_pod("serve-3", "hyb-2", 2, rs, 40),
            gpu_pod("train-0", "hyb-3", 4, job, 0), gpu_pod("serve-4", "hyb-3", 2, rs, 50))
    with running(api, tmp_path) as service:
        wait_until(lambda: carried(api) == wanted(api), message="every rank set")
        costs = carried(api)
        # hyb-1 (one pod) before hyb-2 (two), before hyb-3 (held by training too),
        # every hybrid cost below every inference cost
        assert costs["serve-1"] < costs["serve-2"] == costs["serve-3"] < costs["serve-4"]
        assert costs["serve-4"] <= -100 < costs["serve-0"] == 1000
        api.reset_log()
        api.delete("Pod", "ml", "train-0")  # hyb-3 is now serve's alone
        wait_until(lambda: carried(api) == wanted(api), message="hyb-3 re-ranked")
        assert carried(api)["serve-4"] < carried(api)["serve-2"]
        assert {w.path.rsplit("/", 1)[-1] for w in api.writes("PATCH")} == {"serve-4"}
        api.modify("Pod", "ml", "serve-2",  # a person's value is kept
                   lambda pod: pod["metadata"]["annotations"].update({COST: "5"}))
        api.reset_log()
        api.delete("Pod", "ml", "serve-3")  # hyb-2 now holds one pod of serve's
        api.put(gpu_pod("serve-5", "hyb-1", 2, rs, 60))  # queued after hyb-2: a marker
        wait_until(lambda: carried(api)["serve-5"] is not None, message="serve-5 ranked")
        assert carried(api)["serve-2"] == 5
        assert {w.path.rsplit("/", 1)[-1] for w in api.writes("PATCH")} == {"serve-1",
                                                                            "serve-5"}
        metrics = service.metrics.registry
        by_reason = {reason: lambda r=reason: metrics.get_sample_value(
            "poolguard_reconciler_writes_total", {"reason": r}) for reason in ("new", "rank")}
        wait_until(lambda: by_reason["new"]() == 7, message="serve-5's write counted")
        assert by_reason["rank"]() == 2


def test_state_preview_prints_every_governed_scheduled_pod(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["reconcile", "--state", "examples/cluster-state.yaml", "--policy",
                 "examples/policy.yaml", "--dry-run", "--output", "json"])
    out = capsys.readouterr().out
    pods = json.loads(out)["pods"]
    assert code == 0 and len(pods) == 27  # 28 pods, one not scheduled
    assert all(set(p) == {"namespace", "name", "node", "pool", "deletionCost", "desiredCost"}
               for p in pods)
    by_name = {p["name"]: p for p in pods}
    assert by_name["llm-serve-7c9d8f6b5-k4z9s"]["desiredCost"] == 2000  # a person's value
    assert all(p["deletionCost"] == p["desiredCost"] for p in pods)  # the example is ranked
    code = main(["reconcile", "--state", "examples/cluster-state.yaml", "--policy",
                 str(FLAT_POLICY_FILE), "--dry-run"])
    *lines, summary = capsys.readouterr().out.splitlines()
    assert code == 0 and lines and all(line.endswith("(node gpu-hyb-1, pool hybrid)")
                                       or line.endswith("(node gpu-hyb-2, pool hybrid)")
                                       for line in lines)
    assert "-> -100 " in lines[0]  # a flat policy puts them back at the pool's cost
    assert summary.endswith(f"27 governed scheduled pods: would patch {len(lines)}, "
                            f"unchanged {27 - len(lines)}")


@pytest.mark.parametrize(("flags", "message"), [
    (["--state", "examples/cluster-state.yaml"], "use it with --dry-run only"),
    (["--output", "json", "--dry-run"], "give --state FILE"),
    (["--state", "missing.yaml", "--dry-run"], "missing.yaml"),
])
def test_state_preview_refuses_unusable_flags(capsys: pytest.CaptureFixture[str],
                                              flags: list[str], message: str) -> None:
    code = main(["reconcile", "--policy", "examples/policy.yaml", *flags])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith("error: ") and message in captured.err
