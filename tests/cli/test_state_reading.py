"""A state file is read as the cluster is: repeated objects once, missing data named."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from tests.support import factories as f
from tests.support import lws_factories as lf
from tests.support.install import REPO
from webhook.cli.main import main
from webhook.cli.plan_document import plan_workload
from webhook.core.leaderworkerset.leader_worker_set import GROUP_INDEX_LABEL, WORKER_INDEX_LABEL
from webhook.core.policy.policy import default_policy
from webhook.core.view.snapshot import Snapshot

STATE = REPO / "examples" / "cluster-state.yaml"


def items() -> list[dict]:
    return yaml.safe_load(STATE.read_text())["items"]


def write(path: Path, *objects: dict) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))
    return path


def plan(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["plan", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def plan_json(capsys: pytest.CaptureFixture[str], state: Path, *args: str) -> dict:
    code, out, err = plan(capsys, "--state", state, *args, "-o", "json")
    assert code == 0, err
    return json.loads(out)


def test_a_state_file_written_twice_is_read_once_with_a_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cat state.yaml state.yaml`: the same verdict and victims as the file once."""
    twice = tmp_path / "twice.yaml"
    twice.write_text(STATE.read_text() * 2)
    args = ("--workload", "deploy/ml/llm-serve", "--replicas", "3")
    once = plan_json(capsys, STATE, *args)
    code, out, err = plan(capsys, "--state", twice, *args, "-o", "json")
    assert code == 0
    assert json.loads(out) == once
    assert len(items()) == 49
    assert err.strip() == (f"note: state file {twice}: 49 objects appear more than once (49 "
                           "repeated copies: Namespace ml, Node gpu-inf-1, Node gpu-inf-2 and "
                           "46 more); each is read once")


def test_a_later_reading_appended_is_read_once_the_last_copy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An -A dump, then one namespace's pods read again later (one pod's cost changed)."""
    objects = items()
    pods = [copy.deepcopy(o) for o in objects if o["kind"] == "Pod"]
    changed = next(p for p in pods if p["metadata"]["name"] == "llm-serve-7c9d8f6b5-k4z9s")
    changed["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"] = "-100"
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"kind": "List", "items": objects}) + "\n"
                     + json.dumps({"kind": "List", "items": pods}))
    code, out, err = plan(capsys, "--state", state, "--workload", "deploy/ml/llm-serve",
                          "--replicas", "3", "-o", "json")
    assert code == 0
    document = json.loads(out)
    costs = {pod["name"]: pod["deletionCost"] for pod in document["pods"]}
    assert costs["llm-serve-7c9d8f6b5-k4z9s"] == -100
    victims = [v["name"] for v in document["victims"]]
    assert "llm-serve-7c9d8f6b5-k4z9s" in victims and len(set(victims)) == len(victims)
    assert f"{len(pods)} repeated copies" in err
    assert "1 of them differ between copies (two readings of the cluster, e.g. Pod " \
           "ml/llm-serve-7c9d8f6b5-k4z9s): the last copy in the file is read" in err


def test_two_different_objects_under_one_name_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = items()
    other = copy.deepcopy(next(o for o in objects if o["kind"] == "Pod"))
    other["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    state = write(tmp_path / "state.json", *objects, other)
    code, out, err = plan(capsys, "--state", state, "--workload", "deploy/ml/llm-serve",
                          "--replicas", "3")
    name = other["metadata"]["name"]
    assert code == 2 and out == ""
    assert err.startswith(f"error: {state}: document 1, items[49]: Pod ml/{name} is also at "
                          f"{state}: document 1, items[")
    assert "with different uids" in err and len(err.strip().splitlines()) == 1


def _lws_with_unready_leader(startup_policy: str) -> tuple[dict, Snapshot]:
    """Three groups of three; group 2's leader is not ready and it has no workers."""
    lws, objects = lf.lws_state([["inf-1", "hyb-1", "hyb-1"]] * 3)
    lws["spec"]["startupPolicy"] = startup_policy
    kept = []
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        in_group_2 = labels.get(GROUP_INDEX_LABEL) == "2"
        if in_group_2 and obj["kind"] == "Pod" and labels.get(WORKER_INDEX_LABEL) == "0":
            for condition in obj["status"]["conditions"]:
                if condition["type"] == "Ready":
                    condition["status"] = "False"
        elif in_group_2 and obj["kind"] in ("Pod", "StatefulSet") \
                and obj["metadata"]["name"] != lws["metadata"]["name"]:
            continue  # its worker StatefulSet is not created yet, nor its workers
        kept.append(obj)
    nodes = [f.node("inf-1", "inference"), f.node("hyb-1", "hybrid")]
    return lws, Snapshot([*nodes, *kept])


def test_a_leader_ready_group_waiting_for_its_leader_is_not_a_gap() -> None:
    """Under startupPolicy LeaderReady the LeaderWorkerSet controller creates a group's
    workers once its leader is ready: 7 pods of 3 groups of 3 is what it means to run."""
    lws, view = _lws_with_unready_leader("LeaderReady")
    assert len(view.pods("ml")) == 7
    document = plan_workload(view, default_policy(), lws, 2, None)
    assert document["checked"] is True and document["notCheckedBecause"] is None
    assert document["allowed"] is not None


def test_missing_workers_under_leader_created_are_still_a_gap() -> None:
    lws, view = _lws_with_unready_leader("LeaderCreated")
    document = plan_workload(view, default_policy(), lws, 2, None)
    assert document["allowed"] is None
    assert "the state holds 7 of the 9 pods LeaderWorkerSet ml/llm reports" in \
        document["notCheckedBecause"]


def test_a_state_without_the_replicasets_names_the_missing_owner(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """All 6 pods are there; what is missing is the ReplicaSet they name."""
    state = write(tmp_path / "state.json", *(o for o in items() if o["kind"] != "ReplicaSet"))
    code, out, _ = plan(capsys, "--state", state, "--workload", "deploy/ml/llm-serve",
                        "--replicas", "3", "--fail-on-deny")
    assert code == 4
    assert "No pod is deleted." not in out
    assert "Victims unknown: the state lacks what the prediction needs (below)." in out
    assert ("Verdict: NOT CHECKED (the state has no ReplicaSet ml/llm-serve-7c9d8f6b5, the "
            "owner of 6 of its pods (the pods are in the state; add the ReplicaSets: kubectl "
            "get replicasets -n ml -o json); the state holds 0 of the 6 pods") in out


NAMESPACE_POLICY = """\
namespaceSelector:
  matchLabels: {team: serving}
pools:
- {name: inference, deletionCost: 1000, protected: true}
- {name: hybrid, deletionCost: -100}
"""


def test_a_state_without_the_namespace_a_selector_needs_is_not_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Namespace ml carries team=serving; a state without it cannot say it is not selected."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(NAMESPACE_POLICY)
    state = write(tmp_path / "state.json", *(o for o in items() if o["kind"] != "Namespace"))
    args = ("--policy", policy, "--workload", "deploy/ml/llm-serve", "--replicas", "3",
            "--fail-on-deny")
    code, out, _ = plan(capsys, "--state", state, *args)
    assert code == 4
    assert ("Verdict: NOT CHECKED (the state has no Namespace ml, whose labels the policy's "
            "namespaceSelector needs (add it: kubectl get namespace ml -o json))") in out
    assert "is not selected" not in out
    code, out, _ = plan(capsys, "--state", STATE, *args)  # with the Namespace: judged
    assert code == 3 and "Verdict: DENIED" in out


def test_an_audit_lists_the_verdicts_not_given_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [o for o in items() if not (o["kind"] == "ReplicaSet"
                                          and o["metadata"]["name"].startswith("reranker"))]
    state = write(tmp_path / "state.json", *objects)
    code, out, _ = plan(capsys, "--state", state, "--all-workloads", "--replicas", "1",
                        "--fail-on-deny")
    rows = out.splitlines()[1:-2]
    assert code == 3  # a denial outranks a verdict not given in the exit code
    assert rows[0].startswith("Rollout ml/reranker") and "NOT CHECKED" in rows[0]
    assert "DENIED" in rows[1]


def test_a_workload_the_policy_does_not_govern_is_allowed_not_unchecked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The webhook checks none of a skipped namespace: that is its answer, exit 0."""
    objects = items()
    for obj in objects:
        if obj["kind"] == "Namespace":
            obj["metadata"]["labels"]["poolguard.dev/skip"] = "true"
    state = write(tmp_path / "state.json", *objects)
    code, out, _ = plan(capsys, "--state", state, "--all-workloads", "--replicas", "1",
                        "--fail-on-deny")
    assert code == 0
    assert "NOT CHECKED" not in out
    assert "ALLOWED  not checked: namespace ml is labelled poolguard.dev/skip=true" in out


def test_a_workload_skipped_by_its_own_label_needs_no_namespace(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(NAMESPACE_POLICY)
    objects = [o for o in items() if o["kind"] != "Namespace"]
    for obj in objects:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "llm-serve":
            obj["metadata"].setdefault("labels", {})["poolguard.dev/skip"] = "true"
    state = write(tmp_path / "state.json", *objects)
    code, out, _ = plan(capsys, "--state", state, "--policy", policy, "--workload",
                        "deploy/ml/llm-serve", "--replicas", "3", "--fail-on-deny")
    assert code == 0
    assert ("Verdict: ALLOWED (not checked: Deployment ml/llm-serve is labelled "
            "poolguard.dev/skip=true)") in out
