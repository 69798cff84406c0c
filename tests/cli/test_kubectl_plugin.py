"""`kubectl poolguard`: the plugin as kubectl runs it, against the fake API server.

When kubectl is installed the commands go through `kubectl poolguard ...` itself (kubectl
finds `kubectl-poolguard` on the PATH, as it does for a user); else the script is run
directly. The plan it prints must equal `python -m webhook plan` on the same state.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kubeapi.helpers import items_of
from tests.support.kubeapi.server import FakeKubeAPI

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_STATE = REPO / "examples" / "cluster-state.yaml"
BIN = Path(sys.executable).parent
PLUGIN = BIN / "kubectl-poolguard"
KUBECTL = shutil.which("kubectl")
NOW = ["--now", "2026-01-31T12:00:00Z"]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeKubeAPI, Path]]:
    """The example cluster; the kubeconfig's current context has namespace ml."""
    with FakeKubeAPI() as api:
        api.put(*items_of(yaml.safe_load_all(EXAMPLE_STATE.read_text())))
        config = json.loads(api.write_kubeconfig(tmp_path / "base").read_text())
        config["contexts"][0]["context"]["namespace"] = "ml"
        config["contexts"].append({"name": "other", "context": {
            "cluster": "fake", "user": "fake", "namespace": "elsewhere"}})
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps(config))
        yield api, kubeconfig


def plugin(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{BIN}:{os.environ['PATH']}"}
    command = [KUBECTL, "poolguard"] if KUBECTL else [str(PLUGIN)]
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def plan_from_state(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook", "plan", "--state", str(EXAMPLE_STATE),
                           *args], capture_output=True, text=True, timeout=60, check=False)


def put_policy(api: FakeKubeAPI, text: str, namespace: str = "poolguard") -> None:
    api.put({"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "poolguard-policy", "namespace": namespace},
             "data": {"policy.yaml": text}})


def test_the_console_script_is_installed_where_kubectl_finds_it() -> None:
    assert PLUGIN.is_file() and os.access(PLUGIN, os.X_OK)
    if KUBECTL:
        listed = subprocess.run([KUBECTL, "plugin", "list"], capture_output=True, text=True,
                                env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
                                check=False)
        assert str(PLUGIN) in listed.stdout


def test_plan_uses_the_context_namespace_and_matches_plan_on_the_same_state(
        cluster: tuple[FakeKubeAPI, Path]) -> None:
    api, kubeconfig = cluster
    put_policy(api, (REPO / "examples" / "policy.yaml").read_text())
    result = plugin(kubeconfig, "plan", "deploy/llm-serve", "--replicas", "3", *NOW)
    expected = plan_from_state("--workload", "deploy/ml/llm-serve", "--replicas", "3", *NOW,
                               "--policy", str(REPO / "examples" / "policy.yaml"))
    assert result.returncode == expected.returncode == 0, result.stderr
    assert result.stdout == expected.stdout
    assert result.stdout.startswith("Deployment ml/llm-serve: 6 -> 3 replicas")
    assert result.stderr == ""
    assert api.write_count() == 0


def test_namespace_flag_type_name_form_and_json(cluster: tuple[FakeKubeAPI, Path]) -> None:
    api, kubeconfig = cluster
    put_policy(api, (REPO / "examples" / "policy.yaml").read_text())
    result = plugin(kubeconfig, "plan", "deployment", "llm-serve", "-n", "ml", "--replicas", "2",
                    "-o", "json", *NOW)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    assert document["workload"]["namespace"] == "ml"
    assert document["workload"]["name"] == "llm-serve"
    wrong = plugin(kubeconfig, "plan", "deploy/llm-serve", "--replicas", "2", "--context",
                   "other")
    assert wrong.returncode == 2
    assert "Deployment elsewhere/llm-serve: not found" in wrong.stderr


def test_several_workloads_and_a_replica_delta_match_plan(
        cluster: tuple[FakeKubeAPI, Path]) -> None:
    api, kubeconfig = cluster
    put_policy(api, (REPO / "examples" / "policy.yaml").read_text())
    policy = ["--policy", str(REPO / "examples" / "policy.yaml")]
    expected = plan_from_state("--workload", "deploy/ml/llm-serve", "--workload",
                               "deploy/ml/embedder", "--replicas-delta", "-1", *NOW, *policy)
    assert expected.returncode == 0, expected.stderr
    for words in (["deploy/llm-serve", "deploy/embedder"], ["deploy", "llm-serve", "embedder"]):
        result = plugin(kubeconfig, "plan", *words, "--replicas-delta", "-1", *NOW)
        assert result.returncode == 0, result.stderr
        assert result.stdout == expected.stdout
    assert expected.stdout.startswith("Deployment ml/llm-serve: 6 -> 5 replicas")
    assert "\n\nDeployment ml/embedder: " in expected.stdout
    both = plugin(kubeconfig, "plan", "deploy/llm-serve", "deploy/embedder", "--replicas", "1",
                  "-o", "json", *NOW)
    assert [d["workload"]["name"] for d in json.loads(both.stdout)] == ["llm-serve", "embedder"]


def test_version_is_the_plugins() -> None:
    from webhook import __version__

    result = subprocess.run([str(PLUGIN), "--version"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"kubectl poolguard {__version__}"


def test_without_a_kubeconfig_one_line_says_so(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(tmp_path)
    result = subprocess.run([str(PLUGIN), "plan", "deploy/llm-serve", "--replicas", "3", "-n",
                             "ml"], capture_output=True, text=True, env=env, timeout=60,
                            check=False)
    assert result.returncode == 2
    line, = result.stderr.strip().splitlines()
    assert line.startswith("error: no kubeconfig found") and "--kubeconfig FILE" in line, line
    assert "Traceback" not in result.stderr


def test_the_installed_policy_is_the_one_judged(cluster: tuple[FakeKubeAPI, Path]) -> None:
    api, kubeconfig = cluster
    policy = (REPO / "examples" / "policy.yaml").read_text()
    put_policy(api, policy.replace("enforcement: enforce", "enforcement: warn"))
    warned = plugin(kubeconfig, "plan", "deploy/llm-serve", "--replicas", "2", *NOW)
    assert warned.returncode == 0, warned.stderr
    assert "(enforcement: warn)" in warned.stdout
    put_policy(api, policy.replace("enforcement: enforce", "enforcement: dryrun"), "guard")
    other = plugin(kubeconfig, "plan", "deploy/llm-serve", "--replicas", "2",
                   "--poolguard-namespace", "guard", *NOW)
    assert "(enforcement: dryrun)" in other.stdout
    api.delete("ConfigMap", "poolguard", "poolguard-policy")
    builtin = plugin(kubeconfig, "plan", "deploy/llm-serve", "--replicas", "2", *NOW)
    assert builtin.returncode == 0
    assert "(enforcement: enforce)" in builtin.stdout
    assert builtin.stderr.startswith("note: ConfigMap poolguard/poolguard-policy not found")
    put_policy(api, "pools: []\n")
    broken = plugin(kubeconfig, "plan", "deploy/llm-serve", "--replicas", "2")
    assert broken.returncode == 2
    # named where a user can fix it: the ConfigMap and its key, not a scratch file
    assert broken.stderr.startswith(
        "error: ConfigMap poolguard/poolguard-policy (key policy.yaml): pools:"), broken.stderr
    assert "kubectl-poolguard-" not in broken.stderr
    put_policy(api, "pools: [\n")
    unparsable = plugin(kubeconfig, "plan", "deploy/llm-serve", "--replicas", "2")
    assert unparsable.returncode == 2
    assert unparsable.stderr.startswith("error: ConfigMap poolguard/poolguard-policy (key "
                                        "policy.yaml): line 2"), unparsable.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["plan", "pods/x", "--replicas", "1"],
     "TYPE must be a deployment, replicaset, statefulset, leaderworkerset, rollout or "
     "cloneset"),
    (["plan", "llm-serve", "--replicas", "1"], "expected TYPE/NAME or TYPE NAME"),
    (["plan", "deploy/x", "--replicas", "1", "--context", "nope"],
     "--context nope: no such context"),
    (["plan", "deploy/x"], "--replicas"),
    (["plan", "deploy/x", "--replicas", "1", "--replicas-delta", "-1"], "not allowed with"),
    (["plan", "deploy/x", "llm-serve", "--replicas", "1"], "give each as TYPE/NAME"),
])
def test_usage_errors_exit_2_with_one_line(cluster: tuple[FakeKubeAPI, Path], args: list[str],
                                           message: str) -> None:
    _, kubeconfig = cluster
    result = plugin(kubeconfig, *args)
    assert result.returncode == 2
    line, = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line, line


def test_policy_check_passes_through(cluster: tuple[FakeKubeAPI, Path]) -> None:
    _, kubeconfig = cluster
    result = plugin(kubeconfig, "policy", "check", str(REPO / "examples" / "policy.yaml"))
    assert result.returncode == 0
    assert "a valid poolguard policy" in result.stdout


@pytest.mark.parametrize(("words", "expected"), [
    (["lws/llm"], [("lws", "llm")]),
    (["leaderworkerset", "a", "b"], [("lws", "a"), ("lws", "b")]),
    (["leaderworkersets.leaderworkerset.x-k8s.io/llm"], [("lws", "llm")]),
    (["ro/canary", "deploy/web"], [("ro", "canary"), ("deploy", "web")]),
    (["rollouts.argoproj.io", "canary"], [("ro", "canary")]),
    (["Rollout/canary"], [("ro", "canary")]),
])
def test_kubectls_names_of_the_custom_kinds(words: list[str],
                                            expected: list[tuple[str, str]]) -> None:
    from webhook.cli.kubectl_plugin import workloads_of

    assert workloads_of(words) == expected


def test_a_custom_kind_is_looked_up_in_the_live_cluster(
        cluster: tuple[FakeKubeAPI, Path]) -> None:
    api, kubeconfig = cluster
    api.install_crd("LeaderWorkerSet")
    api.put({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
             "metadata": {"name": "llm", "namespace": "ml"},
             "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2}}})
    result = plugin(kubeconfig, "plan", "lws/lmm", "--replicas", "1", "--policy",
                    str(REPO / "examples" / "policy.yaml"))
    assert result.returncode == 2
    assert result.stderr == ("error: LeaderWorkerSet ml/lmm: not found in the cluster state; "
                             "did you mean llm?\n")
