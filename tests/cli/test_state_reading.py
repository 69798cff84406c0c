"""A state file is read as the cluster is: repeated objects once, missing data named."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from tests.support.install import REPO
from webhook.cli.main import main

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
