"""`plan` with the custom kinds (LeaderWorkerSets, Argo Rollouts, CloneSets): their names,
look-ups and listing.

The spellings kubectl users type reach the right kind, a look-up that misses says what
is there, another API group's `Rollout` is not an Argo Rollout, and `--all-workloads`
plans each owner once (never the StatefulSets or ReplicaSets it sizes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support import cloneset_factories as cf
from tests.support import factories as f
from tests.support.custom_kinds import custom_kinds_state, lws_objects, rollout_objects
from tests.support.kubeapi.helpers import items_of
from tests.support.lws_factories import leader_worker_set
from webhook.cli import plan_document
from webhook.cli.main import main
from webhook.cluster.state import EXAMPLE_STATE

NOW = "2026-11-22T12:00:00Z"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return custom_kinds_state(tmp_path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("spelling", "kind", "typo", "meant"), [
    ("leaderworkerset", "LeaderWorkerSet", "lmm", "llm"),
    ("leaderworkersets", "LeaderWorkerSet", "lmm", "llm"),
    ("lws", "LeaderWorkerSet", "lmm", "llm"),
    ("LWS", "LeaderWorkerSet", "lmm", "llm"),
    ("rollout", "Rollout", "canery", "canary"),
    ("rollouts", "Rollout", "canery", "canary"),
    ("ro", "Rollout", "canery", "canary"),
])
def test_each_spelling_finds_its_kind(state, capsys, spelling, kind, typo, meant):
    code, out, err = run(capsys, "--state", str(state), "--workload",
                         f"{spelling}/ml/{typo}", "--replicas", "1")
    assert (code, out) == (2, "")
    assert err == (f"error: {kind} ml/{typo}: not found in the cluster state; did you mean "
                   f"{meant}?\n")


def test_another_groups_rollout_is_not_an_argo_rollout(state, capsys):
    code, _, err = run(capsys, "--state", str(state), "--workload", "ro/ml/other",
                       "--replicas", "1")
    assert code == 2
    assert err == ("error: Rollout ml/other: not found in the cluster state; the Rollouts "
                   "in namespace ml: canary, reranker\n")


def test_an_unknown_kind_lists_every_accepted_spelling(state, capsys):
    code, _, err = run(capsys, "--state", str(state), "--workload", "widget/ml/x",
                       "--replicas", "1")
    assert code == 2
    assert err == ("error: --workload 'widget/ml/x': unknown kind 'widget' (use "
                   "deployment, replicaset, statefulset, leaderworkerset, rollout or "
                   "cloneset, or deploy, rs, sts, lws, ro, clone)\n")


@pytest.mark.parametrize(("ref", "kind"), [("lws/ml/llm", "LeaderWorkerSet"),
                                           ("ro/ml/canary", "Rollout"),
                                           ("clone/ml/llm-clone", "CloneSet")])
def test_a_custom_kind_is_planned(state, capsys, ref, kind):
    code, out, err = run(capsys, "--state", str(state), "--workload", ref, "--replicas", "1",
                         "--now", NOW, "-o", "json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    name = ref.rpartition("/")[2]
    assert document["workload"] == {"kind": kind, "namespace": "ml", "name": name}
    assert document["replicas"]["to"] == 1


def test_all_workloads_leaves_out_what_an_owner_sizes(tmp_path, capsys):
    """LeaderWorkerSets and Rollouts at 0 have nothing to plan; their StatefulSets (the
    leaders', a group's workers') and ReplicaSets are never planned on their own."""
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(f.kube_list(
        *items_of(yaml.safe_load_all(EXAMPLE_STATE.read_text())), *lws_objects(0),
        *rollout_objects(0))))
    code, out, err = run(capsys, "--state", str(path), "--all-workloads", "--replicas-delta",
                         "-1", "--now", NOW, "-o", "json")
    assert (code, err) == (0, "")
    planned = [(doc["workload"]["kind"], doc["workload"]["name"]) for doc in json.loads(out)]
    # The example's own LeaderWorkerSet and Rollout (at 3 and 4) are planned.
    assert planned == [("Deployment", "embedder"), ("Deployment", "llm-serve"),
                       ("LeaderWorkerSet", "llm-multi"), ("ReplicaSet", "gpu-probe"),
                       ("Rollout", "reranker"), ("StatefulSet", "kv-cache")]


def test_all_workloads_includes_the_custom_kinds(state, capsys):
    """Each LeaderWorkerSet, Rollout and CloneSet with replicas to give up is planned once,
    as itself."""
    code, out, err = run(capsys, "--state", str(state), "--all-workloads",
                         "--replicas-delta", "-1", "--now", NOW, "-o", "json")
    assert (code, err) == (0, "")
    planned = [(doc["workload"]["kind"], doc["workload"]["name"]) for doc in json.loads(out)]
    assert planned == [("CloneSet", "llm-clone"),
                       ("Deployment", "embedder"), ("Deployment", "llm-serve"),
                       ("LeaderWorkerSet", "llm"), ("LeaderWorkerSet", "llm-multi"),
                       ("ReplicaSet", "gpu-probe"), ("Rollout", "canary"),
                       ("Rollout", "reranker"), ("StatefulSet", "kv-cache")]


def test_a_workload_the_core_cannot_read_is_one_error_line(tmp_path, capsys, monkeypatch):
    """A value the core fails on (a hand-edited state file with a field no shape check
    covers) ends in one `error:` line naming the workload, exit code 2, never a traceback."""
    def fails(*_args, **_kwargs):
        raise ValueError("invalid literal for int() with base 10: 'first'")

    monkeypatch.setattr(plan_document, "preview_scale", fails)
    lws = leader_worker_set("llm", replicas=2)
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(f.kube_list(f.node("node-1", "inference"), lws)))
    code, out, err = run(capsys, "--state", str(path), "--workload", "lws/ml/llm",
                         "--replicas", "1")
    assert (code, out) == (2, "")
    assert err.startswith("error: LeaderWorkerSet ml/llm: ") and err.count("\n") == 1, err


def specified_cloneset_state(tmp_path: Path, pods_to_delete: list[str]) -> Path:
    """The example state plus a CloneSet of three, its inference pod priced as poolguard
    prices it and its two hybrid pods below, `pods_to_delete` in its scaleStrategy."""
    clone = cf.cloneset("llm-clone", replicas=3,
                        spec={"scaleStrategy": {"podsToDelete": pods_to_delete}})
    pods = [cf.clone_pod(clone, f"llm-clone-{i}", node, cost=cost)
            for i, (node, cost) in enumerate([("gpu-inf-1", "1000"), ("gpu-hyb-1", "-100"),
                                              ("gpu-hyb-1", "-100")])]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(f.kube_list(
        *items_of(yaml.safe_load_all(EXAMPLE_STATE.read_text())), clone, *pods)))
    return path


def test_a_cloneset_pod_named_in_pods_to_delete_gets_the_fix_that_fixes_it(tmp_path, capsys):
    """The inference pod named in podsToDelete goes whatever the costs: the fix names the
    entry to remove (no cost, no cost warning), and without it the same scale is allowed."""
    argv = ["--workload", "clone/ml/llm-clone", "--replicas", "2", "--now", NOW, "-o", "json"]
    code, out, err = run(capsys, "--state", str(specified_cloneset_state(
        tmp_path, ["llm-clone-0"])), *argv)
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert [v["name"] for v in document["victims"]] == ["llm-clone-0"]
    assert document["victims"][0]["reason"] == "named in spec.scaleStrategy.podsToDelete"
    assert [v["fixes"] for v in document["violations"]] == [[
        "remove llm-clone-0 from scaleStrategy.podsToDelete unless it must go (kubectl edit "
        "cloneset -n ml llm-clone), then retry: no cost spares a pod named there"]]
    assert not any("deletion cost" in w for w in document["warnings"])
    code, out, err = run(capsys, "--state", str(specified_cloneset_state(tmp_path, [])), *argv)
    document = json.loads(out)
    assert document["allowed"] and [v["pool"] for v in document["victims"]] == ["hybrid"]


def test_a_specified_cloneset_pod_below_the_count_is_blocked_then_judged_gone(tmp_path, capsys):
    """5 replicas asked, 3 pods: going to 4 still lacks one, whose creation
    scaleStrategy.maxUnavailable (1) holds back while llm-clone-2 is not available. The
    named inference pod goes only after that creation: blocked, waiting on llm-clone-2, and
    the verdict judges the state without it."""
    clone = cf.cloneset("llm-clone", replicas=5, spec={
        "minReadySeconds": 60,
        "scaleStrategy": {"podsToDelete": ["llm-clone-0"], "maxUnavailable": 1}})
    clone["status"]["replicas"] = 3  # the pods it has, as its controller counts them
    pods = [cf.clone_pod(clone, "llm-clone-0", "gpu-inf-1", cost="1000"),
            cf.clone_pod(clone, "llm-clone-1", "gpu-hyb-1", cost="-100"),
            cf.clone_pod(clone, "llm-clone-2", "gpu-hyb-1", cost="-100",
                         ready_time="2026-11-22T11:59:50Z")]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(f.kube_list(
        *items_of(yaml.safe_load_all(EXAMPLE_STATE.read_text())), clone, *pods)))
    code, out, err = run(capsys, "--state", str(path), "--workload", "clone/ml/llm-clone",
                         "--replicas", "4", "--now", NOW, "-o", "json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document["victims"] == []
    (blocked,) = document["blocked"]
    assert (blocked["name"], blocked["waitingOn"]) == ("llm-clone-0", "llm-clone-2")
    assert blocked["reason"] == (
        "the CloneSet creates 1 pod before it deletes a specified one, and "
        "scaleStrategy.maxUnavailable (1) holds the creation back while 1 of its pods is "
        "unavailable")
    assert document["checked"] and not document["allowed"]
    assert [v["rule"] for v in document["violations"]] == ["protectedLast"]
    assert "podsToDelete" in document["violations"][0]["fixes"][0]
