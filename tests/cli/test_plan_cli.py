"""The `plan` command as a user runs it: JSON contract, text table, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.core.deployment.test_deployment_sync import race_cluster
from tests.support import factories as f
from webhook.cluster.state import EXAMPLE_STATE

NOW = "2026-11-22T12:00:00Z"


def plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", "plan", *args],
                          capture_output=True, text=True, timeout=60)


def plan_json(workload: str, replicas: int, *extra: str) -> dict:
    result = plan("--state", str(EXAMPLE_STATE), "--workload", workload,
                  "--replicas", str(replicas), "--now", NOW, "--output", "json", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_deployment_plan_json_contract():
    doc = plan_json("deploy/ml/llm-serve", 3)
    assert doc["workload"] == {"kind": "Deployment", "namespace": "ml", "name": "llm-serve"}
    assert doc["replicas"] == {"from": 6, "to": 3}
    names = [v["name"] for v in doc["victims"]]
    # the two hybrid pods at cost -100 go first, then an inference pod on the doubled-up
    # node, because the third hybrid pod carries a hand-set cost of 2000
    assert names[:2] == ["llm-serve-7c9d8f6b5-h2w5d", "llm-serve-7c9d8f6b5-j6t1r"]
    assert names[2] in ("llm-serve-7c9d8f6b5-x7k2p", "llm-serve-7c9d8f6b5-b9q4m")
    third = doc["victims"][2]
    assert (third["node"], third["pool"], third["deletionCost"]) == ("gpu-inf-1", "inference",
                                                                   1000)
    assert all(v["replicaSet"] == "llm-serve-7c9d8f6b5" for v in doc["victims"])
    assert set(doc["possibleVictims"]) | {names[2]} == {"llm-serve-7c9d8f6b5-x7k2p",
                                                        "llm-serve-7c9d8f6b5-b9q4m"}
    assert doc["allowed"] is False
    assert [v["rule"] for v in doc["violations"]] == ["protectedLast"]
    message = doc["violations"][0]["message"]
    assert "llm-serve-7c9d8f6b5-k4z9s" in message and "scale to 4 replicas" in message
    assert doc["safeReplicas"] == 4
    assert any("set by hand" in w for w in doc["warnings"])
    assert "order" not in doc  # order is for replicaset and statefulset workloads


def test_safe_count_is_allowed():
    doc = plan_json("deployment/ml/llm-serve", 4)
    assert doc["allowed"] is True and doc["violations"] == []
    assert [v["pool"] for v in doc["victims"]] == ["hybrid", "hybrid"]


@pytest.mark.parametrize("enforcement", ["warn", "dryrun"])
def test_warn_and_dryrun_allow(tmp_path, enforcement):
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({
        "pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                  {"name": "hybrid", "deletionCost": -100}],
        "scaleDown": {"enforcement": enforcement}}))
    doc = plan_json("Deployment/ml/llm-serve", 3, "--policy", str(policy))
    assert doc["allowed"] is True
    assert doc["enforcement"] == enforcement
    assert doc["violations"]


def test_statefulset_plan_order():
    doc = plan_json("sts/ml/kv-cache", 1)
    assert [v["name"] for v in doc["victims"]] == ["kv-cache-2", "kv-cache-1"]
    assert doc["order"] == ["kv-cache-2", "kv-cache-1", "kv-cache-0"]
    assert "replicaSet" not in doc["victims"][0]
    assert doc["allowed"] is True  # every hybrid pod goes too


def test_replicaset_plan_order_starts_with_unscheduled():
    doc = plan_json("rs/ml/gpu-probe", 2)
    assert doc["victims"][0]["name"] == "gpu-probe-2abcd"
    assert doc["victims"][0]["node"] is None
    assert doc["order"][0] == "gpu-probe-2abcd" and len(doc["order"]) == 3


def test_rollout_split_is_reported():
    doc = plan_json("deploy/ml/embedder", 1)
    # The split gives each ReplicaSet 1; the new one then keeps 1 available pod, is
    # saturated, and the Deployment controller's next sync empties the old one (what the
    # real controllers do: e2e differential run).
    assert doc["replicaSets"] == {"embedder-5f6c7d8e9": {"from": 3, "to": 0},
                                  "embedder-6a7b8c9d0": {"from": 3, "to": 1}}
    assert len(doc["victims"]) == 5


def test_text_output_is_a_table():
    result = plan("--state", str(EXAMPLE_STATE), "--workload", "deploy/ml/llm-serve",
                  "--replicas", "3", "--now", NOW)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "Deployment ml/llm-serve: 6 -> 3 replicas"
    assert any(line.startswith("VICTIM") and "POOL" in line for line in lines)
    assert "Verdict: DENIED (enforcement: enforce)" in result.stdout


def test_scale_up_deletes_nothing():
    doc = plan_json("deploy/ml/llm-serve", 8)
    assert doc["victims"] == [] and doc["allowed"] is True


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--state", "/nonexistent.yaml", "--workload", "deploy/ml/x", "--replicas", "1"],
         "no such file"),
        (["--state", str(EXAMPLE_STATE), "--workload", "deploy/ml/missing", "--replicas", "1"],
         "Deployment ml/missing: not found"),
        (["--state", str(EXAMPLE_STATE), "--workload", "job/ml/x", "--replicas", "1"],
         "unknown kind 'job'"),
        (["--state", str(EXAMPLE_STATE), "--workload", "ml/x", "--replicas", "1"],
         "expected KIND/NAMESPACE/NAME"),
        (["--state", str(EXAMPLE_STATE), "--workload", "deploy/ml/x", "--replicas", "-1"],
         "negative"),
        (["--state", str(EXAMPLE_STATE), "--workload", "deploy/ml/llm-serve", "--replicas",
          "1", "--now", "yesterday"], "--now 'yesterday'"),
    ],
)
def test_unusable_input_exits_2(args, expected):
    result = plan(*args)
    assert result.returncode == 2
    assert expected in result.stderr
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert result.stdout == ""


def test_malformed_state_file_names_the_line(tmp_path):
    bad = tmp_path / "state.yaml"
    bad.write_text("kind: List\nitems:\n  - kind: Pod\n    metadata: {name: [\n")
    result = plan("--state", str(bad), "--workload", "deploy/ml/x", "--replicas", "1")
    assert result.returncode == 2
    assert result.stderr.startswith("error: state file") and "line" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_state_object_without_kind_is_named(tmp_path):
    bad = tmp_path / "state.yaml"
    bad.write_text(yaml.safe_dump({"kind": "List", "items": [{"metadata": {"name": "x"}}]}))
    result = plan("--state", str(bad), "--workload", "deploy/ml/x", "--replicas", "1")
    assert result.returncode == 2
    assert "items[0]: object has no 'kind'" in result.stderr


def test_multi_document_state(tmp_path):
    documents = yaml.safe_load(EXAMPLE_STATE.read_text())["items"]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    result = plan("--state", str(path), "--workload", "sts/ml/kv-cache", "--replicas", "2",
                  "-o", "json", "--now", NOW)
    assert result.returncode == 0, result.stderr
    assert [v["name"] for v in json.loads(result.stdout)["victims"]] == ["kv-cache-2"]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("creationTimestamp", "yesterday", "metadata.creationTimestamp: 'yesterday' is not"),
        ("replicas", "six", "spec.replicas: must be an integer"),
    ],
)
def test_state_with_a_badly_typed_field_names_it(tmp_path, field, value, expected):
    state = yaml.safe_load(EXAMPLE_STATE.read_text())
    deployment = next(o for o in state["items"] if o["kind"] == "Deployment")
    if field == "replicas":
        deployment["spec"]["replicas"] = value
    else:
        deployment["metadata"][field] = value
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(state))
    result = plan("--state", str(path), "--workload", "deploy/ml/llm-serve", "--replicas", "1")
    assert result.returncode == 2
    assert expected in result.stderr and "Deployment ml/llm-serve" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_state_with_a_badly_typed_group_size_names_it(tmp_path):
    state = yaml.safe_load(EXAMPLE_STATE.read_text())
    state["items"].append({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "llm", "namespace": "ml"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": "two"}}})
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(state))
    result = plan("--state", str(path), "--workload", "lws/ml/llm", "--replicas", "1")
    assert result.returncode == 2
    assert "spec.leaderWorkerTemplate.size: must be an integer" in result.stderr
    assert "LeaderWorkerSet ml/llm" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _owned_by(manager: str) -> list[dict]:
    """managedFields saying `manager` last wrote the pod's deletion cost."""
    return [{"manager": manager, "operation": "Update", "apiVersion": "v1",
             "time": "2026-11-22T11:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:annotations": {
                 "f:controller.kubernetes.io/pod-deletion-cost": {}}}}}]


def test_plan_names_another_controller_that_owns_the_cost(tmp_path):
    """Karpenter overwrote a victim's cost and owns a survivor's: the WHY column, the JSON
    and the warning name it instead of calling the values hand-set."""
    state = yaml.safe_load(EXAMPLE_STATE.read_text())
    pods = {p["metadata"]["name"]: p for p in state["items"] if p["kind"] == "Pod"}
    victim = pods["llm-serve-7c9d8f6b5-h2w5d"]["metadata"]
    victim["annotations"]["controller.kubernetes.io/pod-deletion-cost"] = "-5"
    victim["managedFields"] = _owned_by("karpenter")
    pods["llm-serve-7c9d8f6b5-k4z9s"]["metadata"]["managedFields"] = _owned_by("karpenter")
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(state))
    args = ("--state", str(path), "--workload", "deploy/ml/llm-serve", "--replicas", "3",
            "--now", NOW)

    doc = json.loads(plan(*args, "--output", "json").stdout)
    victims = {v["name"]: v for v in doc["victims"]}
    assert victims["llm-serve-7c9d8f6b5-h2w5d"]["costWriter"] == "karpenter"
    assert victims["llm-serve-7c9d8f6b5-h2w5d"]["reason"].endswith(
        "(cost written by karpenter)")
    assert victims["llm-serve-7c9d8f6b5-j6t1r"]["costWriter"] is None
    writers = {p["name"]: p["costWriter"] for p in doc["pods"]}
    assert writers["llm-serve-7c9d8f6b5-k4z9s"] == "karpenter"
    assert writers["llm-serve-7c9d8f6b5-x7k2p"] is None
    (warning,) = [w for w in doc["warnings"] if "k4z9s" in w]
    assert "deletion cost written by karpenter" in warning
    assert not any("set by hand" in w for w in doc["warnings"])

    text = plan(*args).stdout
    row = next(line for line in text.splitlines() if line.startswith("llm-serve-7c9d8f6b5-h2w5d"))
    assert row.endswith("(cost written by karpenter)")
    assert "warning: llm-serve-7c9d8f6b5-k4z9s" in text and "written by karpenter" in text


def test_a_statefulset_that_stalls_lists_the_blocked_pods(tmp_path):
    # OrderedReady: kv-2 goes, then the controller waits at kv-1 (not Running and Ready,
    # and kv-0 below it is the first unavailable pod), so kv-1 and kv-0 are blocked.
    sts = f.statefulset("kv")
    pods = [f.pod("kv-0", owner=sts, node_name="hyb-1", ready=False),
            f.pod("kv-1", owner=sts, node_name="hyb-1", ready=False),
            f.pod("kv-2", owner=sts, node_name="inf-1")]
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump(f.kube_list(
        f.node("inf-1", "inference"), f.node("hyb-1", "hybrid"), sts, *pods)))
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"pools": [
        {"name": "inference", "deletionCost": 1000, "protected": True},
        {"name": "hybrid", "deletionCost": -100}]}))
    args = ("--state", str(state), "--policy", str(policy), "--workload", "sts/ml/kv",
            "--replicas", "0", "--now", NOW)
    doc = json.loads(plan(*args, "-o", "json").stdout)
    assert [v["name"] for v in doc["victims"]] == ["kv-2"]
    assert [(b["name"], b["waitingOn"], b["pool"]) for b in doc["blocked"]] == [
        ("kv-1", "kv-1", "hybrid"), ("kv-0", "kv-1", "hybrid")]
    assert doc["blocked"][0]["reason"].startswith("kv-1 is not Running and Ready")
    assert [(p["name"], p["fate"]) for p in doc["pods"]] == [
        ("kv-2", "victim"), ("kv-1", "blocked"), ("kv-0", "blocked")]
    assert doc["allowed"] is False  # the stalled state loses kv-2 while kv-1, kv-0 stay
    text = plan(*args).stdout
    assert ("Blocked (deleted only once the controller stops waiting): kv-1 (the controller "
            "waits here); kv-0 waits on kv-1") in text
    assert "Verdict: DENIED" in text


def test_a_stale_available_count_makes_the_old_replicaset_possible_victims(tmp_path):
    # Mid-rollout 3 -> 2: the new ReplicaSet deletes new-x and keeps new-z, ready for
    # less than minReadySeconds; its availableReplicas still counts new-x, so the
    # Deployment controller's next sync may scale the old ReplicaSet (inference) to 0.
    _, objects = race_cluster(paused=True, unavailable="min-ready")
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump(f.kube_list(*objects)))
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"pools": [
        {"name": "inference", "deletionCost": 1000, "protected": True},
        {"name": "hybrid", "deletionCost": -100}]}))
    args = ("--state", str(state), "--policy", str(policy), "--workload", "deploy/ml/web",
            "--replicas", "2", "--now", "2026-03-15T12:00:00Z")
    doc = json.loads(plan(*args, "-o", "json").stdout)
    assert [v["name"] for v in doc["victims"]] == ["new-x"]
    assert doc["possibleVictims"] == ["old-a"]
    fates = {p["name"]: (p["fate"], p["pool"]) for p in doc["pods"]}
    assert fates == {"new-x": ("victim", "hybrid"), "new-y": ("survives", "hybrid"),
                     "new-z": ("survives", "hybrid"),
                     "old-a": ("possible-victim", "inference")}
    reason = next(p["reason"] for p in doc["pods"] if p["name"] == "old-a")
    assert "goes to 0 if the Deployment controller's next sync reads web-new's" in reason
    assert doc["allowed"] is False
    assert "Verdict: DENIED" in plan(*args).stdout
