"""`plan` with LeaderWorkerSets and Argo Rollouts: their names, look-ups and listing.

The spellings kubectl users type reach the right kind, a look-up that misses says what
is there, another API group's `Rollout` is not an Argo Rollout, and `--all-workloads`
plans each owner once (never the StatefulSets or ReplicaSets it sizes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support import factories as f
from tests.support.custom_kinds import leaderworkerset, rollout
from tests.support.kubeapi import items_of
from webhook.cli.main import main
from webhook.cluster.state import EXAMPLE_STATE

NOW = "2026-11-22T12:00:00Z"
LWS_LABEL = "leaderworkerset.sigs.k8s.io/name"


def lws_objects(replicas: int) -> list[dict]:
    """A LeaderWorkerSet with its leader StatefulSet and one group's worker StatefulSet,
    owned as the LeaderWorkerSet controller owns them."""
    lws = leaderworkerset("llm", replicas=replicas)
    leaders = f.statefulset("llm", replicas=2)
    leaders["metadata"]["labels"] = {LWS_LABEL: "llm"}
    leaders["metadata"]["ownerReferences"] = [f.owner_ref(lws)]
    leader_pod = f.pod("llm-0", labels={LWS_LABEL: "llm"}, owner=leaders)
    workers = f.statefulset("llm-0", replicas=1)
    workers["metadata"]["labels"] = {LWS_LABEL: "llm"}
    workers["metadata"]["ownerReferences"] = [f.owner_ref({**leader_pod, "apiVersion": "v1"})]
    return [lws, leaders, leader_pod, workers]


def rollout_objects(replicas: int) -> list[dict]:
    ro = rollout("canary", replicas=replicas)
    stable = f.replicaset("canary-5d8", replicas=2, owner=ro)
    other_group = rollout("other", api_version="example.com/v1")
    return [ro, stable, other_group]


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "state.yaml"
    objects = [*items_of(yaml.safe_load_all(EXAMPLE_STATE.read_text())),
               *lws_objects(2), *rollout_objects(3)]
    path.write_text(yaml.safe_dump(f.kube_list(*objects)))
    return path


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
                   "in namespace ml: canary\n")


def test_an_unknown_kind_lists_every_accepted_spelling(state, capsys):
    code, _, err = run(capsys, "--state", str(state), "--workload", "cloneset/ml/x",
                       "--replicas", "1")
    assert code == 2
    assert err == ("error: --workload 'cloneset/ml/x': unknown kind 'cloneset' (use "
                   "deployment, replicaset, statefulset, leaderworkerset or rollout, or "
                   "deploy, rs, sts, lws, ro)\n")


@pytest.mark.parametrize(("ref", "kind"), [("lws/ml/llm", "LeaderWorkerSet"),
                                           ("ro/ml/canary", "Rollout")])
def test_a_custom_kind_is_planned_or_refused_in_one_error_line(state, capsys, ref, kind):
    """Where the core predicts the kind, the plan names it; where it cannot, one `error:`
    line naming the workload and exit code 2, never a traceback."""
    code, out, err = run(capsys, "--state", str(state), "--workload", ref, "--replicas", "1",
                         "--now", NOW, "-o", "json")
    name = ref.rpartition("/")[2]
    if code == 0:
        assert json.loads(out)["workload"] == {"kind": kind, "namespace": "ml", "name": name}
    else:
        assert (code, out) == (2, "")
        assert err.startswith(f"error: {kind} ml/{name}: ") and err.count("\n") == 1


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
    assert planned == [("Deployment", "embedder"), ("Deployment", "llm-serve"),
                       ("ReplicaSet", "gpu-probe"), ("StatefulSet", "kv-cache")]


def test_all_workloads_includes_the_custom_kinds(state, capsys):
    """With replicas to give up, each LeaderWorkerSet and Rollout is planned (or, where
    the core cannot predict it, named in the one error line)."""
    code, out, err = run(capsys, "--state", str(state), "--all-workloads",
                         "--replicas-delta", "-1", "--now", NOW, "-o", "json")
    if code == 0:
        planned = {(doc["workload"]["kind"], doc["workload"]["name"])
                   for doc in json.loads(out)}
        assert {("LeaderWorkerSet", "llm"), ("Rollout", "canary")} <= planned
        assert ("StatefulSet", "llm") not in planned and ("Rollout", "other") not in planned
    else:
        assert code == 2 and err.startswith(("error: LeaderWorkerSet ml/llm: ",
                                             "error: Rollout ml/canary: "))
