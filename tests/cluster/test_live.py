"""LiveCluster and live `plan` against the fake API server (tests/support/kubeapi/)."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import factories as f
from tests.support.kubeapi.helpers import items_of, wait_until
from tests.support.kubeapi.server import FakeKubeAPI
from webhook.cli.main import main
from webhook.cluster import listing
from webhook.cluster.kubeclient import KubeConfigError, api_client_from
from webhook.cluster.listing import read_snapshot
from webhook.cluster.live import LiveCluster
from webhook.cluster.state import EXAMPLE_STATE, load_state, snapshot_to_list
from webhook.core.view.cluster import IndexedClusterView


@pytest.fixture
def cluster(kubeconfig: str) -> Iterator[LiveCluster]:
    client = api_client_from(kubeconfig)
    live = LiveCluster(client, backoff_initial=0.02, backoff_max=0.1)
    yield live
    live.stop()
    client.close()


def pod_names(cluster: LiveCluster) -> list[str]:
    return sorted(pod["metadata"]["name"] for pod in cluster.all_pods())


def started(cluster: LiveCluster) -> LiveCluster:
    cluster.start()
    assert cluster.wait_for_sync(5)
    return cluster


def test_syncs_every_resource_as_plain_dicts(api: FakeKubeAPI, cluster: LiveCluster) -> None:
    deploy = f.deployment("web")
    rs = f.replicaset("web-1", owner=deploy, pod_hash="1")
    big_pod = f.pod("web-1-a", owner=rs, node_name="n1", cost="5",
                    annotations={"poolguard.dev/pool": "inference", "other/note": "x" * 500})
    big_pod["spec"]["someFutureField"] = {"kept": False}
    big_pod["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:x": {}}}]
    api.put({"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": "ml", "labels": {"team": "serving"}}},
            f.node("n1", "inference"), deploy, rs, f.statefulset("db"), big_pod)
    started(cluster)
    pod = cluster.pod("ml", "web-1-a")
    assert pod is not None and pod["kind"] == "Pod" and pod["apiVersion"] == "v1"
    # The cache keeps what poolguard reads, not the whole object (webhook.compact).
    assert pod["metadata"]["annotations"] == {f.COST_KEY: "5", "poolguard.dev/pool": "inference"}
    assert pod["metadata"]["labels"] == big_pod["metadata"]["labels"]
    owner = (rs["metadata"]["uid"], "ReplicaSet", "web-1")
    assert [p.controller for p in cluster.pod_facts("ml")] == [owner]
    assert pod["spec"] == {"nodeName": "n1"} and pod["status"] == {"phase": "Running"}
    assert "managedFields" not in pod["metadata"]
    assert [p.name for p in cluster.pod_facts("ml")] == ["web-1-a"]
    assert [p["metadata"]["name"] for p in cluster.pods("ml")] == ["web-1-a"]
    assert cluster.node("n1")["metadata"]["labels"]["node.usage"] == "inference"
    assert [n["metadata"]["name"] for n in cluster.nodes()] == ["n1"]
    assert cluster.namespace_labels("ml") == {"team": "serving"}
    assert cluster.namespace_labels("absent") == {}
    assert cluster.workload("Deployment", "ml", "web")["kind"] == "Deployment"
    assert cluster.workload("StatefulSet", "ml", "db")["apiVersion"] == "apps/v1"
    assert [r["kind"] for r in cluster.objects_of("ReplicaSet", "ml")] == ["ReplicaSet"]
    assert cluster.synced and cluster.staleness_seconds() < 5


def test_applies_added_modified_deleted_and_notifies(api: FakeKubeAPI,
                                                     cluster: LiveCluster) -> None:
    seen: list[tuple[str, str, str]] = []
    cluster.on_event(lambda res, typ, obj, old: seen.append((res, typ, obj["metadata"]["name"])))
    cluster.on_event(lambda *event: 1 / 0)  # a broken callback must not stop the watch
    api.put(f.pod("a"))
    started(cluster)
    api.put(f.pod("b"))
    api.modify("Pod", "ml", "a", lambda pod: pod["metadata"].update(labels={"x": "1"}))
    api.delete("Pod", "ml", "b")
    wait_until(lambda: ("pods", "DELETED", "b") in seen, message="DELETED b")
    assert pod_names(cluster) == ["a"]
    assert cluster.pod("ml", "a")["metadata"]["labels"] == {"x": "1"}
    assert [e for e in seen if e[0] == "pods"] == [
        ("pods", "ADDED", "a"), ("pods", "ADDED", "b"), ("pods", "MODIFIED", "a"),
        ("pods", "DELETED", "b")]


@pytest.mark.parametrize("gone_as_http", [False, True], ids=["error-event", "http-410"])
def test_relists_when_the_resource_version_is_gone(api: FakeKubeAPI, cluster: LiveCluster,
                                                   gone_as_http: bool) -> None:
    deleted: list[str] = []
    cluster.on_event(lambda res, typ, obj, old: typ == "DELETED" and deleted.append(
        obj["metadata"]["name"]))
    api.put(f.pod("a"), f.pod("b"))
    started(cluster)
    api.gone_as_http = gone_as_http
    api.stop()  # changes made while the watch is down, then history compacted
    api.delete("Pod", "ml", "a")
    api.put(f.pod("c"))
    api.compact()
    api.start()
    wait_until(lambda: pod_names(cluster) == ["b", "c"], message="relisted pods")
    assert cluster.sync_status()["resources"]["pods"]["lists"] == 2
    assert deleted == ["a"]


def test_a_continue_token_that_expires_mid_list_starts_the_list_over(
        api: FakeKubeAPI, cluster: LiveCluster, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """410 Gone on a later page (the server compacted past the list's resourceVersion):
    the list starts again from the first page, in pages, and the cache ends up equal to
    the server, without the pod deleted after the first page was read."""
    monkeypatch.setattr(listing, "LIST_PAGE", 2)
    caplog.set_level(logging.INFO, logger="poolguard.live")
    api.put(*(f.pod(name) for name in "abcde"))
    api.slow(1.0, count=2, method="GET", path_contains="/api/v1/pods")  # pages 1 and 2
    cluster.start()
    wait_until(lambda: any("continue" in r.query for r in api.requests), message="page 2 asked")
    api.delete("Pod", "ml", "a")  # was on page 1
    api.put(f.pod("z"))
    api.compact()  # the second page's token is now too old
    assert cluster.wait_for_sync(10)
    assert pod_names(cluster) == ["b", "c", "d", "e", "z"]
    lists = [r for r in api.requests if r.path == "/api/v1/pods" and "watch" not in r.query]
    assert [r.status for r in lists] == [200, 410, 200, 200, 200]
    assert all(r.query.get("limit") == "2" for r in lists)  # paged, never one unpaged list
    assert "continue token expired; listing again from the first page" in caplog.text


def test_dropped_watch_resumes_without_relisting(api: FakeKubeAPI,
                                                 cluster: LiveCluster) -> None:
    started(cluster)
    wait_until(lambda: api.open_watches() == 6, message="six open watches")
    watches = api.watch_count("/pods")
    assert api.drop_watches() == 6
    api.put(f.pod("new"))
    wait_until(lambda: pod_names(cluster) == ["new"], message="pod after dropped watch")
    assert api.watch_count("/pods") > watches
    assert cluster.sync_status()["resources"]["pods"]["lists"] == 1


def test_survives_api_restart_and_reports_staleness(api: FakeKubeAPI,
                                                   cluster: LiveCluster) -> None:
    started(cluster)
    wait_until(lambda: cluster.staleness_seconds() < 0.5, message="fresh cache")
    api.stop()
    wait_until(lambda: cluster.staleness_seconds() > 0.3, message="staleness to grow")
    status = cluster.sync_status()
    assert cluster.synced and status["synced"]
    assert status["stalenessSeconds"] >= 0.3
    assert "cannot connect" in status["resources"]["pods"]["lastError"]
    api.start()
    api.put(f.pod("after-restart"))
    wait_until(lambda: pod_names(cluster) == ["after-restart"], message="pod after restart")
    wait_until(lambda: cluster.staleness_seconds() < 0.3, message="staleness to recover")


def test_not_synced_while_the_api_is_down(api: FakeKubeAPI, cluster: LiveCluster) -> None:
    api.stop()
    cluster.start()
    assert not cluster.wait_for_sync(0.2)
    assert not cluster.synced
    assert math.isinf(cluster.staleness_seconds())
    assert cluster.sync_status()["stalenessSeconds"] is None
    api.start()
    assert cluster.wait_for_sync(5)
    assert cluster.staleness_seconds() < 5


def test_retries_server_errors_and_reads_never_block(api: FakeKubeAPI,
                                                     cluster: LiveCluster) -> None:
    api.put(f.pod("a"))
    api.fail(503, count=4)
    started(cluster)
    assert sum(r["errors"] for r in cluster.sync_status()["resources"].values()) >= 4
    api.slow(0.5, seconds=2)
    api.drop_watches()
    began = time.monotonic()
    for _ in range(100):
        assert pod_names(cluster) == ["a"]
    assert time.monotonic() - began < 0.5


def test_stop_interrupts_open_watches(api: FakeKubeAPI, cluster: LiveCluster) -> None:
    started(cluster)
    wait_until(lambda: api.open_watches() >= 6, message="open watches")
    began = time.monotonic()
    cluster.stop()
    assert time.monotonic() - began < 2
    wait_until(lambda: api.open_watches() == 0, message="watches to close")


# ----- read_snapshot and live plan ------------------------------------------------------


def load_example(api: FakeKubeAPI) -> None:
    api.put(*items_of(yaml.safe_load_all(EXAMPLE_STATE.read_text())))


PLAN_ARGS = ["--workload", "deploy/ml/llm-serve", "--replicas", "3",
             "--now", "2026-01-31T12:00:00Z", "-o", "json"]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_snapshot_round_trips_through_a_list(api: FakeKubeAPI, kubeconfig: str,
                                            tmp_path: Path) -> None:
    load_example(api)
    snapshot = read_snapshot(api_client_from(kubeconfig))
    assert all(item["kind"] and item["apiVersion"] for item in snapshot.items)
    document = snapshot_to_list(snapshot)
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump(document))
    again = load_state(path)
    assert sorted(p["metadata"]["name"] for p in again.all_pods()) == sorted(
        p["metadata"]["name"] for p in snapshot.all_pods())
    assert snapshot.counts == again.counts


def test_live_plan_matches_the_state_file_and_save_state_round_trips(
        api: FakeKubeAPI, kubeconfig: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    load_example(api)
    saved = tmp_path / "saved.yaml"
    code, from_file, _ = run_cli(capsys, "plan", "--state", str(EXAMPLE_STATE), *PLAN_ARGS)
    assert code == 0
    code, live, err = run_cli(capsys, "plan", "--kubeconfig", kubeconfig,
                              "--save-state", str(saved), *PLAN_ARGS)
    assert (code, err) == (0, "")
    assert json.loads(live) == json.loads(from_file)
    assert live == from_file
    assert saved.read_text().startswith("# Cluster state read from http://127.0.0.1:")
    code, from_saved, _ = run_cli(capsys, "plan", "--state", str(saved), *PLAN_ARGS)
    assert (code, from_saved) == (0, from_file)
    assert api.write_count() == 0  # plan only reads


def test_save_state_to_a_json_file_writes_json_that_plan_reads_back(
        api: FakeKubeAPI, kubeconfig: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    load_example(api)
    saved = tmp_path / "saved.json"
    code, live, err = run_cli(capsys, "plan", "--kubeconfig", kubeconfig,
                              "--save-state", str(saved), *PLAN_ARGS)
    assert (code, err) == (0, "")
    document = json.loads(saved.read_text())  # plain JSON, no comment line
    assert (document["kind"], document["apiVersion"]) == ("List", "v1")
    assert {item["kind"] for item in document["items"]} >= {"Pod", "Node", "Deployment"}
    code, from_saved, _ = run_cli(capsys, "plan", "--state", str(saved), *PLAN_ARGS)
    assert (code, from_saved) == (0, live)


def test_kubeconfig_resolution(api: FakeKubeAPI, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    load_example(api)
    config: dict[str, Any] = json.loads(api.write_kubeconfig(tmp_path / "one").read_text())
    config["clusters"].append({"name": "dead", "cluster": {"server": "http://127.0.0.1:1"}})
    config["contexts"].append({"name": "dead", "context": {"cluster": "dead", "user": "fake"}})
    config["current-context"] = "dead"
    (tmp_path / "two").write_text(json.dumps(config))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "two"))
    code, out, _ = run_cli(capsys, "plan", "--context", "fake", *PLAN_ARGS)
    assert code == 0 and json.loads(out)["workload"]["name"] == "llm-serve"
    code, _, err = run_cli(capsys, "plan", *PLAN_ARGS)
    assert code == 2
    assert err.startswith("error: cannot reach the API server at http://127.0.0.1:1: ")
    assert err.count("\n") == 1
    code, _, err = run_cli(capsys, "plan", "--context", "nope", *PLAN_ARGS)
    assert code == 2 and "nope" in err and err.count("\n") == 1
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeConfigError, match="in-cluster"):
        api_client_from()
    code, _, err = run_cli(capsys, "plan", "--kubeconfig", str(tmp_path / "missing"),
                           *PLAN_ARGS)
    assert code == 2 and "no such file" in err


def test_state_and_live_flags_do_not_mix(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "plan", "--state", str(EXAMPLE_STATE), "--kubeconfig", "x",
                           *PLAN_ARGS)
    assert code == 2 and "--state" in err


def test_live_plan_reports_api_errors_in_one_line(api: FakeKubeAPI, kubeconfig: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    api.fail(403, path_contains="/pods")
    code, _, err = run_cli(capsys, "plan", "--kubeconfig", kubeconfig, *PLAN_ARGS)
    assert code == 2
    assert err.startswith(f"error: reading the cluster from the API server at {api.url}: "
                          "GET /api/v1/pods: HTTP 403")
    assert err.count("\n") == 1


def test_label_index_follows_adds_label_changes_deletes_and_relists(
        api: FakeKubeAPI, cluster: LiveCluster) -> None:
    """The index a scale check reads its workload's pods from stays equal to a scan."""
    web = f.deployment("web")
    old, new = (f.replicaset(f"web-{h}", owner=web, pod_hash=h) for h in "12")
    api.put(web, old, new, f.pod("a", owner=old), f.pod("b", owner=new), f.pod("c", owner=old))
    started(cluster)
    selectors = [old["spec"]["selector"], new["spec"]["selector"]]

    def indexed(selector: dict) -> list[str]:
        return [p.name for p in cluster.pod_facts_selected("ml", [selector])]

    def scanned(selector: dict) -> list[str]:
        wanted = selector["matchLabels"].items()
        return [p.name for p in cluster.pod_facts("ml") if wanted <= p.labels.items()]

    assert indexed(selectors[0]) == scanned(selectors[0]) == ["a", "c"]
    api.put(f.pod("d", owner=new))
    api.modify("Pod", "ml", "a", lambda pod: pod["metadata"]["labels"].update(
        {"pod-template-hash": "2"}))  # moved to the new ReplicaSet's selector
    api.delete("Pod", "ml", "c")
    wait_until(lambda: cluster.pod("ml", "c") is None, message="c deleted")
    assert indexed(selectors[0]) == scanned(selectors[0]) == []
    assert indexed(selectors[1]) == scanned(selectors[1]) == ["a", "b", "d"]
    api.compact()  # the watch's resourceVersion is gone: the cache lists again
    api.delete("Pod", "ml", "b")
    api.drop_watches()
    wait_until(lambda: cluster.pod("ml", "b") is None, message="b gone after the relist")
    assert indexed(selectors[1]) == scanned(selectors[1]) == ["a", "d"]
    assert [p.name for p in cluster.pod_facts_selected("ml", selectors)] == ["a", "d"]
    assert isinstance(cluster, IndexedClusterView)  # the core reads it through the index


def test_fetch_pod_reads_one_pod_past_the_cache_in_one_bounded_attempt(
        api: FakeKubeAPI, cluster: LiveCluster) -> None:
    """What a binding review does for a pod its watch has not delivered yet."""
    started(cluster)
    api.put(f.pod("fresh", cost="7"))
    fetched = cluster.fetch_pod("ml", "fresh")
    assert fetched is not None and fetched["kind"] == "Pod"
    assert fetched["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"] == "7"
    assert cluster.fetch_pod("ml", "absent") is None
    assert cluster.fetch_pod("elsewhere", "fresh") is None
    api.reset_log()
    api.slow(3.0, path_contains="/api/v1/namespaces/ml/pods")
    began = time.monotonic()
    with pytest.raises(Exception, match="timed out"):
        cluster.fetch_pod("ml", "fresh", timeout=0.3)
    assert time.monotonic() - began < 2.0  # urllib3 would have retried a GET 3 more times
    assert len([r for r in api.requests if r.path == "/api/v1/namespaces/ml/pods"]) == 1
