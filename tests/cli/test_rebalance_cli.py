"""`rebalance --dry-run` as a person runs it: the plan for the bundled example state, in
JSON and in words, and one-line errors for what it cannot do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.install import PY, assert_one_line_error, run
from tests.support.kubeapi.helpers import items_of
from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.rebalance_example import REBALANCE_STATE as STATE
from tests.support.rebalance_example import with_home_tainted
from webhook.cli.main import main

LLM = "llm-serve-7d9f8c-"


def rebalance(*args: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["rebalance", "--state", str(STATE), "--dry-run", *args]) == 0
    return capsys.readouterr().out


def test_the_json_plan_names_the_moves_the_freed_node_and_every_pod_that_stays(capsys) -> None:
    document = json.loads(rebalance("--output", "json", capsys=capsys))
    assert set(document) == {"moves", "freedNodes", "skipped"}
    assert document["moves"] == [
        {"namespace": "ml", "name": LLM + name, "workload": "deployment/ml/llm-serve",
         "node": "gpu-hyb-1", "pool": "hybrid", "toPool": "inference", "gpus": 2}
        for name in ("ex4k", "fx5k")]
    assert document["freedNodes"] == [{"node": "gpu-hyb-1", "pool": "hybrid", "gpus": 8}]
    skipped = {s["name"]: s["reason"] for s in document["skipped"]}
    assert skipped == {
        "batch-ranker-7d9f8c-ax0k": "it is at home: pool hybrid (preferred node affinity)",
        LLM + "gx6k": "node gpu-hyb-2 would not be freed: its pod ml/batch-ranker-7d9f8c-ax0k "
                      "stays (it is at home: pool hybrid (preferred node affinity))",
        "pretrain-0-qx7zt": "its controller is a Job (training, a DaemonSet or another "
                            "controller's pod), not a serving workload",
        "chat-7d9f8c-bx1k": "deployment/ml/chat is not settled: its Deployment chat has "
                            "updatedReplicas 1, not the 2 its spec asks for"}


def test_the_text_plan_says_why_each_pod_moves_or_stays(capsys) -> None:
    text = rebalance(capsys=capsys)
    assert text.startswith("Rebalance plan for ")
    assert "(dry run: nothing is evicted)" in text.splitlines()[0]
    assert "rebalance.enabled: false" in text
    assert "2 pods move home, freeing 1 node (8 GPUs): gpu-hyb-1." in text
    assert f"  ml/{LLM}ex4k  gpu-hyb-1 (hybrid) -> inference, 2 GPUs, " \
        "deployment/ml/llm-serve" in text
    assert "room on gpu-inf-2" in text
    assert "  gpu-hyb-1  pool hybrid, 8 GPUs" in text
    for pod in ("batch-ranker-7d9f8c-ax0k", LLM + "gx6k", "pretrain-0-qx7zt", "chat-7d9f8c-bx1k"):
        assert f"  ml/{pod}  on gpu-hyb-" in text


def test_with_the_room_tainted_away_nothing_moves_and_the_reason_is_shown(
        tmp_path: Path, capsys) -> None:
    tainted = with_home_tainted(tmp_path)
    policy = tmp_path / "policy.yaml"
    policy.write_text("pools:\n- {name: inference, deletionCost: 1000, protected: true}\n"
                      "- {name: hybrid, deletionCost: -100}\nrebalance: {enabled: true}\n")
    assert main(["rebalance", "--state", str(tainted), "--policy", str(policy),
                 "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "Nothing moves" in text and "Moves:" not in text
    assert "rebalance.enabled: false" not in text
    assert "node gpu-hyb-1 is not emptied: inference has no room for its 2 GPU pods (4 GPUs)" \
        in " ".join(text.split())


def test_without_dry_run_it_refuses_in_one_line() -> None:
    result = run(PY, "-m", "webhook", "rebalance", "--state", STATE)
    assert result.returncode == 2
    assert_one_line_error(result, "only plans, with --dry-run", "made by the reconciler")


def test_a_bad_policy_is_one_line_naming_the_field(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("pools: [{name: inference, deletionCost: 1}]\n"
                      "rebalance: {enabled: maybe}\n")
    result = run(PY, "-m", "webhook", "rebalance", "--state", STATE, "--policy", policy,
                 "--dry-run")
    assert result.returncode == 2
    assert_one_line_error(result, str(policy), "rebalance.enabled: must be true or false")


def test_a_state_file_and_a_kubeconfig_together_are_refused(capsys) -> None:
    assert main(["rebalance", "--state", str(STATE), "--kubeconfig", "k", "--dry-run"]) == 2
    assert "leave them out with --state" in capsys.readouterr().err


def test_the_live_cluster_gives_the_plan_the_state_file_gives(tmp_path: Path, capsys) -> None:
    with FakeKubeAPI() as api:
        api.put(*items_of(yaml.safe_load_all(STATE.read_text())))
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        assert main(["rebalance", "--kubeconfig", str(kubeconfig), "--dry-run", "-o",
                     "json"]) == 0
        live = json.loads(capsys.readouterr().out)
    assert live == json.loads(rebalance("-o", "json", capsys=capsys))


def test_a_hand_edited_state_with_a_wrong_type_is_one_line_naming_the_field(
        tmp_path: Path) -> None:
    state = yaml.safe_load(STATE.read_text())
    pod = next(item for item in state["items"] if item["kind"] == "Pod")
    pod["spec"]["tolerations"] = {"key": "dedicated"}
    bad = tmp_path / "state.yaml"
    bad.write_text(yaml.safe_dump(state))
    result = run(PY, "-m", "webhook", "rebalance", "--state", bad, "--dry-run")
    assert result.returncode == 2
    assert_one_line_error(result, str(bad), "spec.tolerations: must be a list")
