"""The live cache and `plan` read the custom workload kinds where their CRDs exist.

A cluster without the CRDs is the usual case: the cache is synced, fresh and quiet
without them, and notices a CRD installed (or removed) later.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import cloneset_factories as cf
from tests.support import factories as f
from tests.support.kubeapi.helpers import items_of, wait_until
from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.lws_factories import leader_worker_set
from tests.support.rollouts import rollout as argo_rollout
from webhook.cli.main import main
from webhook.cluster.kubeclient import api_client_from
from webhook.cluster.listing import read_snapshot
from webhook.cluster.live import LiveCluster
from webhook.cluster.state import EXAMPLE_STATE, load_state
from webhook.core.kinds.registry import KINDS
from webhook.core.objects.kube import parse_time_ns
from webhook.core.scale.predict import predict_scale
from webhook.core.view.snapshot import Snapshot

CUSTOM = tuple(kind.plural for kind in KINDS if kind.custom)
NOW_NS = parse_time_ns("2026-11-22T12:00:00Z")


@pytest.fixture
def cluster(kubeconfig: str) -> Iterator[LiveCluster]:
    client = api_client_from(kubeconfig)
    live = LiveCluster(client, backoff_initial=0.02, backoff_max=0.1, absent_recheck=0.1)
    yield live
    live.stop()
    client.close()


def test_without_the_crds_the_cache_is_synced_fresh_and_quiet(
        api: FakeKubeAPI, cluster: LiveCluster, caplog: pytest.LogCaptureFixture) -> None:
    api.put(f.deployment("web"))
    caplog.set_level(logging.INFO, logger="poolguard.live")
    cluster.start()
    assert cluster.wait_for_sync(5)
    wait_until(lambda: api.watch_count("/deployments") > 0, message="the apps watches")
    wait_until(lambda: len([r for r in api.requests if "/leaderworkersets" in r.path]) >= 3,
               message="the CRD to be asked for again")
    status = cluster.sync_status()
    assert status["synced"] and status["stalenessSeconds"] < 5
    for name in CUSTOM:
        resource = status["resources"][name]
        assert resource["absent"] == "not installed"
        assert (resource["synced"], resource["errors"], resource["lastError"],
                resource["objects"]) == (True, 0, None, 0)
    assert status["resources"]["deployments"]["absent"] is None
    assert cluster.workload("Deployment", "ml", "web") is not None
    assert cluster.workload("LeaderWorkerSet", "ml", "web") is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    # Said once per kind, not at every re-check.
    said = [r.getMessage() for r in caplog.records if "not installed" in r.getMessage()]
    assert len(said) == len(CUSTOM), said
    assert api.watch_count("/leaderworkersets") == api.watch_count("/rollouts") == 0


def test_a_crd_installed_later_is_listed_and_watched(api: FakeKubeAPI,
                                                     cluster: LiveCluster) -> None:
    cluster.start()
    assert cluster.wait_for_sync(5)
    api.install_crd("LeaderWorkerSet")
    api.put(leader_worker_set("llm", replicas=4))
    lws = wait_until(lambda: cluster.workload("LeaderWorkerSet", "ml", "llm"),
                     message="the LeaderWorkerSet in the cache")
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["spec"]["replicas"] == 4
    assert cluster.sync_status()["resources"]["leaderworkersets"]["absent"] is None
    assert cluster.sync_status()["resources"]["rollouts"]["absent"] == "not installed"
    api.modify("LeaderWorkerSet", "ml", "llm",
               lambda obj: obj["spec"].__setitem__("replicas", 2))
    wait_until(lambda: cluster.workload("LeaderWorkerSet", "ml", "llm")["spec"]["replicas"] == 2,
               message="the watched change")
    assert api.watch_count("/leaderworkersets") >= 1


def test_a_crd_removed_takes_its_objects_out_of_the_cache(api: FakeKubeAPI,
                                                           cluster: LiveCluster) -> None:
    api.install_crd("Rollout")
    api.put(argo_rollout("canary", 3))
    events: list[tuple[str, str]] = []
    cluster.on_event(lambda resource, kind, obj, old: events.append((resource, kind)))
    cluster.start()
    assert cluster.wait_for_sync(5)
    assert cluster.workload("Rollout", "ml", "canary") is not None
    api.remove_crd("Rollout")
    wait_until(lambda: cluster.workload("Rollout", "ml", "canary") is None,
               message="the Rollout to leave the cache")
    wait_until(lambda: cluster.sync_status()["resources"]["rollouts"]["absent"] == "not installed",
               message="rollouts absent")
    assert ("rollouts", "DELETED") in events
    assert cluster.synced and cluster.staleness_seconds() < 5


def test_a_kind_the_role_does_not_grant_is_absent_not_an_error(
        api: FakeKubeAPI, cluster: LiveCluster) -> None:
    api.install_crd("Rollout")
    api.fail(403, path_contains="/rollouts")
    cluster.start()
    assert cluster.wait_for_sync(5)
    status = cluster.sync_status()["resources"]["rollouts"]
    assert (status["absent"], status["errors"]) == ("not permitted", 0)
    api.clear_faults()  # the role granted later
    api.put(argo_rollout("late", 3))
    wait_until(lambda: cluster.workload("Rollout", "ml", "late"), message="the late Rollout")


def test_other_errors_of_a_custom_kind_still_count(api: FakeKubeAPI,
                                                   cluster: LiveCluster) -> None:
    api.install_crd("LeaderWorkerSet")
    api.fail(503, count=2, path_contains="/leaderworkersets")
    cluster.start()
    assert cluster.wait_for_sync(5)
    status = cluster.sync_status()["resources"]["leaderworkersets"]
    assert status["errors"] >= 2 and status["absent"] is None


# ----- plan on a live cluster ------------------------------------------------------------


def run_plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_read_snapshot_without_the_crds_is_the_apps_kinds(api: FakeKubeAPI,
                                                          kubeconfig: str) -> None:
    api.put(*items_of(yaml.safe_load_all(EXAMPLE_STATE.read_text())))
    snapshot = read_snapshot(api_client_from(kubeconfig))
    assert {item["kind"] for item in snapshot.items} == {
        "Namespace", "Node", "Deployment", "ReplicaSet", "StatefulSet", "Pod"}


def test_save_state_keeps_the_custom_kinds_and_plan_finds_them(
        api: FakeKubeAPI, kubeconfig: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    api.install_crd("LeaderWorkerSet")
    api.install_crd("Rollout")
    api.put(*items_of(yaml.safe_load_all(EXAMPLE_STATE.read_text())),
            leader_worker_set("llm", replicas=2), argo_rollout("canary", 3))
    saved = tmp_path / "saved.yaml"
    code, _, err = run_plan(capsys, "--kubeconfig", kubeconfig, "--save-state", str(saved),
                            "--workload", "deploy/ml/llm-serve", "--replicas", "5")
    assert (code, err) == (0, "")
    kinds = [item["kind"] for item in yaml.safe_load(saved.read_text())["items"]]
    # After the apps kinds and pods (the example's own LeaderWorkerSet and Rollout too).
    assert kinds[-4:] == ["LeaderWorkerSet", "LeaderWorkerSet", "Rollout", "Rollout"]
    state = load_state(saved)
    assert state.workload("LeaderWorkerSet", "ml", "llm")["spec"]["replicas"] == 2
    assert state.workload("Rollout", "ml", "canary")["spec"]["replicas"] == 3


def test_the_cache_predicts_a_cloneset_as_its_state_file_does(api: FakeKubeAPI,
                                                               cluster: LiveCluster) -> None:
    """The compact pods keep what the CloneSet predictor reads beyond the ranking's facts
    (a preDelete hook's finalizer, the InPlaceUpdateReady condition): the webhook's cache
    and a state file give the same victims."""
    hook = {"preDelete": {"finalizersHandler": ["example.com/drain"]}}
    clone = cf.cloneset("llm", replicas=4, spec={"lifecycle": hook})
    in_place = cf.clone_pod(clone, "llm-updating", "hyb-2", cost="-50")
    in_place["status"]["conditions"].append({"type": "InPlaceUpdateReady", "status": "False"})
    objects = [f.node("inf-1", "inference"), f.node("hyb-1", "hybrid"),
               f.node("hyb-2", "hybrid"), clone, in_place,
               cf.clone_pod(clone, "llm-drained", "hyb-1", cost="-100",
                            finalizers=["example.com/drain"]),
               *(cf.clone_pod(clone, f"llm-{i}", "inf-1", cost="1000") for i in range(2))]
    api.install_crd("CloneSet")
    api.put(*objects)
    cluster.start()
    assert cluster.wait_for_sync(5)
    wait_until(lambda: cluster.workload("CloneSet", "ml", "llm"), message="the CloneSet")
    wait_until(lambda: len(cluster.pods("ml")) == 4, message="the pods")

    def fates(view: Any) -> tuple[list[str], list[str]]:
        prediction = predict_scale(view, clone, 2, NOW_NS)
        return ([p.name for p in prediction.victims],
                [b.pod.name for b in prediction.blocked])

    from_file = fates(Snapshot(objects))
    assert from_file == (["llm-updating"], ["llm-drained"])
    assert fates(cluster) == from_file
