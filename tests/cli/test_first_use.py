"""What a new user meets first: no kubeconfig, a hand-edited state file, a typo'd workload,
output into a closed pipe or a full disk, swapped certificate files. Each is one `error:`
line (or, for a reader that left, nothing) and never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.install import PY, REPO, assert_one_line_error, run
from tests.support.serving import free_port, make_certs

STATE = REPO / "examples" / "cluster-state.yaml"
POLICY = REPO / "examples" / "policy.yaml"
REBALANCE_STATE = REPO / "examples" / "rebalance-state.yaml"


def without_cluster(home: Path) -> dict[str, str]:
    """The environment of a machine with no kubeconfig, outside any Pod."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    env["HOME"] = str(home)
    return env


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr


def state_items() -> list[dict]:
    return [item for doc in yaml.safe_load_all(STATE.read_text()) if doc
            for item in doc.get("items", [doc])]


# --- no kubeconfig ----------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    ["-m", "webhook", "plan", "--workload", "deploy/ml/llm-serve", "--replicas", "3"],
    ["-m", "webhook", "reconcile", "--policy", str(POLICY), "--once"],
    ["-m", "certs", "sync", "--namespace", "poolguard", "--service", "s", "--secret", "t"],
])
def test_without_a_kubeconfig_every_command_says_so(tmp_path: Path, command: list[str]) -> None:
    result = run(PY, *command, env=without_cluster(tmp_path))
    assert_one_line_error(result, "no kubeconfig found", "$KUBECONFIG", "~/.kube/config",
                          "in-cluster", "--kubeconfig FILE")
    no_traceback(result)


def test_plan_and_serve_without_a_kubeconfig_suggest_a_state_file(tmp_path: Path) -> None:
    planned = run(PY, "-m", "webhook", "plan", "--workload", "deploy/ml/llm-serve",
                  "--replicas", "3", env=without_cluster(tmp_path))
    assert_one_line_error(planned, "no kubeconfig found", "--state FILE")
    tls = make_certs(tmp_path / "tls")
    served = run(PY, "-m", "webhook", "serve", "--cert", tls["cert"], "--key", tls["key"],
                 "--host", "127.0.0.1", "--port", str(free_port()),
                 env=without_cluster(tmp_path))
    assert_one_line_error(served, "no kubeconfig found", "--state FILE")
    no_traceback(served)


# --- state files ------------------------------------------------------------------------


def test_a_negative_replica_count_is_refused_naming_the_object(tmp_path: Path) -> None:
    items = state_items()
    for item in items:
        if item["kind"] == "Deployment" and item["metadata"]["name"] == "llm-serve":
            item["spec"]["replicas"] = -6
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    result = run(PY, "-m", "webhook", "plan", "--state", state, "--workload",
                 "deploy/ml/llm-serve", "--replicas", "3")
    assert_one_line_error(result, str(state), "Deployment ml/llm-serve", "spec.replicas is -6",
                          "0 or more")


def test_concatenated_json_documents_are_read(tmp_path: Path) -> None:
    items = state_items()
    half = len(items) // 2
    state = tmp_path / "state.json"
    state.write_text("".join(json.dumps({"apiVersion": "v1", "kind": "List", "items": part},
                                        indent=2) for part in (items[:half], items[half:])))
    from_json = run(PY, "-m", "webhook", "plan", "--state", state, "--workload",
                    "deploy/ml/llm-serve", "--replicas", "3", "--now", "2026-01-31T12:00:00Z")
    from_yaml = run(PY, "-m", "webhook", "plan", "--state", STATE, "--workload",
                    "deploy/ml/llm-serve", "--replicas", "3", "--now", "2026-01-31T12:00:00Z")
    assert from_json.returncode == 0, from_json.stderr
    assert from_json.stdout == from_yaml.stdout


def test_yaml_outputs_appended_with_two_greater_thans_are_all_read(tmp_path: Path) -> None:
    """`kubectl get ... -o yaml >> state.yaml` twice: no `---` between the Lists, so one
    YAML mapping repeats its keys; every List is read, not only the last."""
    items = state_items()
    workloads = [i for i in items if i["kind"] in ("Deployment", "StatefulSet")]
    rest = [i for i in items if i not in workloads]
    state = tmp_path / "state.yaml"
    state.write_text("".join(yaml.safe_dump({"apiVersion": "v1", "items": part, "kind": "List",
                                             "metadata": {"resourceVersion": ""}})
                             for part in (rest, workloads[:1], workloads[1:])))
    args = ("--now", "2026-01-31T12:00:00Z", "--all-workloads", "--replicas-delta", "-1",
            "-o", "json")
    appended = run(PY, "-m", "webhook", "plan", "--state", state, *args)
    whole = run(PY, "-m", "webhook", "plan", "--state", STATE, *args)
    assert appended.returncode == 0, appended.stderr
    names = [d["workload"]["name"] for d in json.loads(appended.stdout)]
    assert names == [d["workload"]["name"] for d in json.loads(whole.stdout)]
    assert {"llm-serve", "embedder", "kv-cache"} <= set(names)


@pytest.mark.parametrize(("text", "where"), [
    ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n"
     "    name: ml\n    name: ai\n", "line 8, column 5: duplicate key 'name' (first at line 7)"),
    ('{"apiVersion": "v1", "kind": "List", "items": [], "items": []}',
     "document 1 (from line 1): duplicate key 'items'"),
    ("apiVersion: v1\nkind: List\nitems: []\nitems: []\n",
     "line 4, column 1: duplicate key 'items' (first at line 3)"),
])
def test_a_repeated_key_is_refused_by_name(tmp_path: Path, text: str, where: str) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(text)
    result = run(PY, "-m", "webhook", "plan", "--state", state, "--workload",
                 "deploy/ml/llm-serve", "--replicas", "3")
    assert_one_line_error(result, str(state), where, "keeps only the last")


def test_broken_json_still_names_the_line(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text('{"kind": "List", "items": []}\n{"kind": "List",\n "items": [}\n')
    result = run(PY, "-m", "webhook", "plan", "--state", state, "--workload", "deploy/a/b",
                 "--replicas", "1")
    assert_one_line_error(result, str(state), "line 3")


@pytest.mark.parametrize(("workload", "hint"), [
    ("deploy/ml/llm-serv", "did you mean llm-serve?"),
    ("deploy/ml/nothing-like-it", "the Deployments in namespace ml: embedder, llm-serve"),
    ("deploy/nope/llm-serve", "no Deployment in namespace nope, but there is Deployment "
                              "ml/llm-serve"),
])
def test_a_workload_not_found_lists_what_exists(workload: str, hint: str) -> None:
    result = run(PY, "-m", "webhook", "plan", "--state", STATE, "--workload", workload,
                 "--replicas", "1")
    assert_one_line_error(result, "not found", hint)


def test_several_workloads_in_one_plan() -> None:
    result = run(PY, "-m", "webhook", "plan", "--state", STATE, "--workload",
                 "deploy/ml/llm-serve", "--workload", "sts/ml/kv-cache", "--replicas", "1",
                 "-o", "json")
    assert result.returncode == 0, result.stderr
    names = [doc["workload"]["name"] for doc in json.loads(result.stdout)]
    assert names == ["llm-serve", "kv-cache"]
    html = run(PY, "-m", "webhook", "plan", "--state", STATE, "--workload",
               "deploy/ml/llm-serve", "--workload", "sts/ml/kv-cache", "--replicas", "1",
               "-o", "html")
    assert_one_line_error(html, "--output html draws one workload")


@pytest.mark.parametrize(("policy", "message"), [
    ("pools: [{name: a, deletionCost: 1}]\nscaleDown: {enforcement: }\n",
     "scaleDown.enforcement: must be one of enforce, warn, dryrun, got an empty value"),
    ("pools: [{name: a, deletionCost: }]\n", "deletionCost: must be an integer, got an empty"),
    ("pools: [{name: a, deletionCost: 1}]\nnamespaceSelector:\n  matchExpressions: [{key: a}]\n",
     "operator: is required"),
])
def test_errors_never_show_python_none(tmp_path: Path, policy: str, message: str) -> None:
    (tmp_path / "policy.yaml").write_text(policy)
    result = run(PY, "-m", "webhook", "policy", "check", tmp_path / "policy.yaml")
    assert_one_line_error(result, message)
    assert "None" not in result.stderr


# --- output -----------------------------------------------------------------------------


COMMANDS = [
    ["-m", "webhook", "policy", "check", str(POLICY)],
    ["-m", "webhook", "plan", "--state", str(STATE), "--workload", "deploy/ml/llm-serve",
     "--replicas", "3"],
    ["-m", "webhook", "rebalance", "--state", str(REBALANCE_STATE), "--dry-run"],
    ["-m", "certs", "ca-bundle", "--out-dir", "DIR"],
]


def with_certs(command: list[str], tmp_path: Path) -> list[str]:
    tls = make_certs(tmp_path / "tls")
    return [str(tls["ca"].parent) if word == "DIR" else word for word in command]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_reader_that_left_ends_the_command_quietly(tmp_path: Path, command: list[str]) -> None:
    command = with_certs(command, tmp_path)
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `| head -1` once it has its line
    try:
        result = subprocess.run([sys.executable, *command], stdout=write_end,
                                stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=60,
                                check=False)
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode in (0, 141)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_full_disk_is_one_error_line(tmp_path: Path, command: list[str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    command = with_certs(command, tmp_path)
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, *command], stdout=full,
                                stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=60,
                                check=False)
    assert result.returncode == 2
    line, = result.stderr.strip().splitlines()
    assert line == "error: cannot write the output: No space left on device"


# --- certificate files ------------------------------------------------------------------


def test_serve_with_certificate_and_key_swapped_names_the_file(tmp_path: Path) -> None:
    tls = make_certs(tmp_path / "tls")
    result = run(PY, "-m", "webhook", "serve", "--cert", tls["key"], "--key", tls["cert"],
                 "--state", STATE, "--host", "127.0.0.1", "--port", str(free_port()))
    assert_one_line_error(result, f"--cert {tls['key']}: not a PEM certificate (it holds a "
                          "private key)")
    no_traceback(result)
    assert "PEM lib" not in result.stderr
    keyless = run(PY, "-m", "webhook", "serve", "--cert", tls["cert"], "--key", tls["ca"],
                  "--state", STATE, "--host", "127.0.0.1", "--port", str(free_port()))
    assert_one_line_error(keyless, f"--key {tls['ca']}: not a PEM private key (it holds a "
                          "certificate)")


# --- a state that does not hold what the verdict needs -----------------------------------


def _without(tmp_path: Path, drop) -> Path:
    """The example state without the items `drop` picks."""
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                     "items": [i for i in state_items() if not drop(i)]}))
    return state


def _is_pod_of(prefix: str):
    return lambda item: item["kind"] == "Pod" and item["metadata"]["name"].startswith(prefix)


@pytest.mark.parametrize(("drop", "workload", "why"), [
    (_is_pod_of("gpu-probe-"), "rs/ml/gpu-probe",
     "the state holds 0 of the 3 pods ReplicaSet ml/gpu-probe reports (status.replicas 3)"),
    (_is_pod_of("llm-serve-7c9d8f6b5-h"), "deploy/ml/llm-serve",
     "the state holds 5 of the 6 pods Deployment ml/llm-serve reports (status.replicas 6)"),
    (_is_pod_of("llm-multi-2"), "lws/ml/llm-multi",
     "the state holds 4 of the 6 pods LeaderWorkerSet ml/llm-multi reports "
     "(status.replicas 3 groups of 2)"),
    (lambda i: i["kind"] == "Node" and i["metadata"]["name"] == "gpu-hyb-1",
     "ro/ml/reranker",
     "the state has no node gpu-hyb-1 (pods reranker-6d4b8c7f5-g5h6i), so their pools are "
     "unknown"),
])
def test_missing_pods_or_nodes_are_not_checked_never_allowed(tmp_path: Path, drop, workload,
                                                             why) -> None:
    state = _without(tmp_path, drop)
    args = ("--state", str(state), "--workload", workload, "--replicas", "1", "--now",
            "2026-01-31T12:00:00Z")
    text = run(PY, "-m", "webhook", "plan", *args)
    assert text.returncode == 0, text.stderr
    assert f"Verdict: NOT CHECKED ({why})" in text.stdout.splitlines()
    assert "ALLOWED" not in text.stdout
    document = json.loads(run(PY, "-m", "webhook", "plan", *args, "-o", "json").stdout)
    assert (document["checked"], document["allowed"]) == (False, None)
    assert document["notCheckedBecause"] == why
    assert run(PY, "-m", "webhook", "plan", *args, "--fail-on-deny").returncode == 4


def test_an_audit_of_a_state_without_pods_gates_as_not_checked(tmp_path: Path) -> None:
    state = _without(tmp_path, lambda item: item["kind"] == "Pod")
    audit = run(PY, "-m", "webhook", "plan", "--state", state, "--all-workloads",
                "--replicas-delta", "-1", "--fail-on-deny")
    assert audit.returncode == 4, audit.stdout + audit.stderr
    rows = audit.stdout.splitlines()[1:-2]
    assert rows and all("NOT CHECKED" in row and "the state holds 0 of the" in row
                        for row in rows), audit.stdout
