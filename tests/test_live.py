"""LiveCluster and live `plan` against the fake API server (tests/kubeapi.py)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import factories as f
import pytest
from kubeapi import FakeKubeAPI, wait_until

from webhook.kubeclient import api_client_from
from webhook.live import LiveCluster


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI(bookmark_interval=0.05) as server:
        yield server


@pytest.fixture
def kubeconfig(api: FakeKubeAPI, tmp_path: Any) -> str:
    return str(api.write_kubeconfig(tmp_path / "kubeconfig"))


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
    future_pod = f.pod("web-1-a", owner=rs, node_name="n1")
    future_pod["spec"]["someFutureField"] = {"kept": True}
    api.put({"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": "ml", "labels": {"team": "serving"}}},
            f.node("n1", "inference"), deploy, rs, f.statefulset("db"), future_pod)
    started(cluster)
    pod = cluster.pod("ml", "web-1-a")
    assert pod is not None and pod["kind"] == "Pod" and pod["apiVersion"] == "v1"
    assert pod["spec"]["someFutureField"] == {"kept": True}
    assert [p["metadata"]["name"] for p in cluster.pods("ml")] == ["web-1-a"]
    assert cluster.node("n1")["metadata"]["labels"]["node.usage"] == "inference"
    assert [n["metadata"]["name"] for n in cluster.nodes()] == ["n1"]
    assert cluster.namespace_labels("ml") == {"team": "serving"}
    assert cluster.namespace_labels("absent") == {}
    assert cluster.workload("Deployment", "ml", "web")["kind"] == "Deployment"
    assert cluster.workload("StatefulSet", "ml", "db")["apiVersion"] == "apps/v1"
    assert [r["kind"] for r in cluster.replicasets("ml")] == ["ReplicaSet"]
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
