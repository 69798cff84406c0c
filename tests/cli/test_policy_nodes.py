"""`policy check --state` and `plan` against the nodes: a policy that names no node is
reported, and `plan` gives no checked verdict under it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_POLICY = (REPO / "examples" / "policy.yaml").read_text()
STATE = "examples/cluster-state.yaml"
TYPOS = {
    "pool-label": ("poolLabel: node.usage ", "poolLabel: node.pool  "),
    "pool-name": ("name: inference", "name: inferense"),
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=60, check=False)


@pytest.fixture(params=sorted(TYPOS))
def mistyped(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    old, new = TYPOS[request.param]
    assert old in EXAMPLE_POLICY
    path = tmp_path / "policy.yaml"
    path.write_text(EXAMPLE_POLICY.replace(old, new, 1))
    return request.param, path


def test_policy_check_lists_each_pools_nodes_and_the_values_that_name_no_pool():
    result = run("policy", "check", "examples/policy.yaml", "--state", STATE)
    assert result.returncode == 0, result.stderr
    tail = result.stdout.splitlines()[-4:]
    assert tail == ["Nodes of examples/cluster-state.yaml by pool (node.usage):",
                    "  inference    2 nodes: gpu-inf-1, gpu-inf-2",
                    "  hybrid       2 nodes: gpu-hyb-1, gpu-hyb-2",
                    "  other nodes  2 nodes (training on 1 node; 1 node without node.usage)"]
    assert result.stderr == ("warning: examples/policy.yaml: 1 node carries "
                             "node.usage=training, which names no pool: their pods get "
                             "defaultDeletionCost 0\n")


def test_policy_check_refuses_a_policy_whose_protected_pool_has_no_node(mistyped):
    typo, path = mistyped
    result = run("policy", "check", str(path), "--state", STATE, "--quiet")
    assert result.returncode == 3, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    if typo == "pool-label":
        assert errors == [
            f"error: {path}: no node carries the pool label node.pool: every pod gets "
            "defaultDeletionCost 0 and no pod is on a protected pool; node labels whose values "
            "name pools: node.usage (hybrid on 2 nodes, inference on 2 nodes)"]
    else:
        assert errors == [
            f"error: {path}: protected pool 'inferense' has no node (no node carries "
            "node.usage=inferense), so nothing is protected there; 2 nodes carry 'inference', "
            "which names no pool: a typo?"]
        assert (f"warning: {path}: 2 nodes carry node.usage=inference, which names no pool: "
                "their pods get defaultDeletionCost 0") in result.stderr.splitlines()


def test_policy_check_without_nodes_only_validates(mistyped):
    _, path = mistyped
    assert run("policy", "check", str(path), "--quiet").returncode == 0


def test_plan_under_a_policy_that_names_no_protected_node_gives_no_verdict(mistyped):
    _, path = mistyped
    args = ("plan", "--state", STATE, "--policy", str(path), "--workload",
            "deploy/ml/llm-serve", "--replicas", "1", "--now", "2026-11-22T12:00:00Z")
    document = json.loads(run(*args, "--output", "json").stdout)
    assert (document["checked"], document["allowed"]) == (False, None)
    assert document["notCheckedBecause"].startswith("the policy does not match the nodes: ")
    text = run(*args)
    assert "Verdict: NOT CHECKED (the policy does not match the nodes: " in text.stdout
    assert text.stderr.startswith(f"warning: {path}: ")
    assert run(*args, "--fail-on-deny").returncode not in (0, 3)  # not-checked, never allowed


def test_plan_all_workloads_under_such_a_policy_checks_none(mistyped):
    _, path = mistyped
    result = run("plan", "--state", STATE, "--policy", str(path), "--all-workloads",
                 "--replicas-delta", "-1", "--fail-on-deny")
    assert result.returncode not in (0, 3), result.stdout
    assert "6 workloads: 0 denied, 0 allowed despite violations, 0 allowed, 6 not checked." in (
        result.stdout)


def test_plan_under_the_example_policy_still_judges():
    result = run("plan", "--state", STATE, "--workload", "deploy/ml/llm-serve", "--replicas",
                 "1", "--now", "2026-11-22T12:00:00Z", "--fail-on-deny")
    assert result.returncode == 3, result.stdout  # denied, as before
    assert result.stderr == ""  # the training node is a label value policy check names


def test_policy_check_against_the_live_cluster_reads_its_nodes(mistyped, tmp_path):
    import yaml

    from tests.support.kubeapi.server import FakeKubeAPI

    _, path = mistyped
    with FakeKubeAPI() as api:
        api.put(*yaml.safe_load((REPO / STATE).read_text())["items"])
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        good = run("policy", "check", "examples/policy.yaml", "--kubeconfig", kubeconfig)
        bad = run("policy", "check", str(path), "--kubeconfig", kubeconfig, "-q")
        reads = {request.path for request in api.requests}
    assert good.returncode == 0, good.stderr
    assert "Nodes of the cluster by pool (node.usage):" in good.stdout
    assert "  inference    2 nodes: gpu-inf-1, gpu-inf-2" in good.stdout.splitlines()
    assert bad.returncode == 3 and bad.stderr.startswith("error: ")
    assert reads == {"/api/v1/nodes"}  # nodes only: no pod list for a policy check


def test_reconcile_preview_under_such_a_policy_says_why_costs_would_change(mistyped):
    _, path = mistyped
    result = run("reconcile", "--state", STATE, "--policy", str(path), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "deletion cost 1000 -> 0" in result.stdout  # what it would do, shown
    assert result.stderr.startswith(f"warning: {path}: ")  # and why, never silently
