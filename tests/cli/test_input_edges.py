"""Inputs at the edges: int32 counts, files that are not UTF-8, the reconciler's preview,
a StatefulSet a LeaderWorkerSet owns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.install import REPO
from webhook.cli.main import main

STATE = REPO / "examples" / "cluster-state.yaml"
POLICY = REPO / "examples" / "policy.yaml"
NOW = "2026-11-22T12:00:00Z"


def command(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exit_:  # argparse's usage errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--replicas", "99999999999999999999", "replicas must be at most 2147483647"),
    ("--replicas-delta", "-99999999999999999999", "the delta must be at least -2147483647"),
])
def test_a_count_beyond_int32_on_the_command_line_is_refused(
        capsys: pytest.CaptureFixture[str], flag: str, value: str, says: str) -> None:
    code, out, err = command(capsys, "plan", "--state", STATE, "--workload",
                             "deploy/ml/llm-serve", flag, value)
    assert code == 2 and out == ""
    one_error_line(err, says)


def _state_with(tmp_path: Path, field: str, value: object) -> Path:
    items = yaml.safe_load(STATE.read_text())["items"]
    for item in items:
        if item["kind"] == "Deployment" and item["metadata"]["name"] == "llm-serve":
            item[field.split(".")[0]][field.split(".")[1]] = value
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"kind": "List", "items": items}))
    return path


@pytest.mark.parametrize(("field", "value", "says"), [
    ("spec.replicas", 10**30, "spec.replicas: 1000000000000000000000000000000 is more than "
                              "the int32 maximum 2147483647"),
    ("status.replicas", 2**31, "status.replicas: 2147483648 is more than the int32 maximum"),
    ("spec.replicas", 1e30, "spec.replicas: must be an integer, got 1e+30"),
])
def test_a_count_beyond_int32_in_a_state_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object,
        says: str) -> None:
    state = _state_with(tmp_path, field, value)
    code, _, err = command(capsys, "plan", "--state", state, "--workload",
                           "deploy/ml/llm-serve", "--replicas", "3")
    assert code == 2
    one_error_line(err, "Deployment ml/llm-serve", says)


def test_a_policy_count_beyond_int32_is_refused(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("pools:\n- {name: inference, deletionCost: 1000, protected: true}\n"
                      "scaleDown:\n  minProtectedReplicas: 99999999999999999999999\n")
    code, _, err = command(capsys, "policy", "check", policy)
    assert code == 2
    one_error_line(err, "scaleDown.minProtectedReplicas: 99999999999999999999999 is more "
                        "than a replica count can be (2147483647")


@pytest.mark.parametrize(("content", "says"), [
    ("utf-16", "it is UTF-16 text, and poolguard reads UTF-8"),
    (b"apiVersion: v1\nkind: List\nitems: []\n\xe9\n",
     "line 4, column 1: byte 0xe9 is not UTF-8"),
    (b"apiVersion: v1\nkind: List\x00\nitems: []\n", "line 2, column 11: a NUL byte"),
    (b"apiVersion: v1\nkind: List\x01\nitems: []\n",
     "line 2, column 11: not valid YAML or JSON: control characters are not allowed"),
])
@pytest.mark.parametrize("what", ["state", "policy"])
def test_a_file_that_is_not_utf8_text_is_one_error_line_with_a_hint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, says: str,
        what: str) -> None:
    path = tmp_path / "file.yaml"
    path.write_bytes(STATE.read_text().encode("utf-16") if content == "utf-16" else content)
    if what == "state":
        args = ("plan", "--state", path, "--workload", "deploy/ml/llm-serve", "--replicas", "3")
    else:
        args = ("policy", "check", path)
    code, _, err = command(capsys, *args)
    assert code == 2
    one_error_line(err, f"{what} file {path}", says)
    if content == "utf-16":
        assert f"iconv -f UTF-16 -t UTF-8 {path} > {path}.utf8" in err


@pytest.mark.parametrize("policy", [(), ("--policy", POLICY)])
def test_reconcile_preview_of_a_state_says_what_it_found_when_nothing_changes(
        capsys: pytest.CaptureFixture[str], policy: tuple) -> None:
    """No --policy: the built-in one, as plan takes it; a summary even with no change."""
    code, out, err = command(capsys, "reconcile", "--state", STATE, "--dry-run", *policy)
    assert code == 0, err
    named = POLICY if policy else "the built-in policy"
    assert out.splitlines()[-1] == (f"reconcile (dry run, {STATE}, {named}): 27 governed "
                                    "scheduled pods: would patch 0, unchanged 27")


def test_a_statefulset_a_leaderworkerset_owns_takes_its_groups_workers(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = command(capsys, "plan", "--state", STATE, "--workload", "sts/ml/llm-multi",
                             "--replicas", "2", "--now", NOW, "-o", "json")
    assert code == 0, err
    document = json.loads(out)
    assert [(v["name"], v["reason"]) for v in document["victims"]] == [
        ("llm-multi-2", "ordinal outside the new range"),
        ("llm-multi-2-1", "worker of leader llm-multi-2 (garbage-collected with its worker "
                          "StatefulSet llm-multi-2)")]
    assert ("StatefulSet llm-multi is managed by LeaderWorkerSet llm-multi, which sizes it and "
            "will undo a direct scale") in document["warnings"]
    assert any("plan lws/ml/llm-multi for the scale its owner makes" in warning
               for warning in document["warnings"])
