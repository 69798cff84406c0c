"""The fake API server behaves like the parts of kube-apiserver the clients rely on."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.support import factories as f
from tests.support.kubeapi.server import FakeKubeAPI

MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI(bookmark_interval=0.1) as server:
        server.put(f.node("n1", "inference"), f.pod("p1", node_name="n1"))
        yield server


def watch_lines(api: FakeKubeAPI, query: str, out: list[dict[str, Any]]) -> threading.Thread:
    def run() -> None:
        with requests.get(f"{api.url}/api/v1/pods?watch=1&{query}", stream=True,
                          timeout=5) as response:
            out.extend(json.loads(line) for line in response.iter_lines() if line)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_list_has_resource_version_and_items_without_kind(api: FakeKubeAPI) -> None:
    body = requests.get(f"{api.url}/api/v1/namespaces/ml/pods", timeout=5).json()
    assert body["kind"] == "PodList"
    assert body["metadata"]["resourceVersion"] == str(api.resource_version)
    assert [item["metadata"]["name"] for item in body["items"]] == ["p1"]
    assert "kind" not in body["items"][0]


def test_label_selectors(api: FakeKubeAPI) -> None:
    def names(selector: str) -> list[str]:
        body = requests.get(f"{api.url}/api/v1/nodes", params={"labelSelector": selector},
                            timeout=5).json()
        return [item["metadata"]["name"] for item in body["items"]]

    assert names("node.usage=inference") == ["n1"]
    assert names("node.usage in (hybrid, training)") == []
    assert names("node.usage,!missing") == ["n1"]
    assert names("node.usage!=inference") == []


def test_merge_patch_precondition_and_no_op(api: FakeKubeAPI) -> None:
    url = f"{api.url}/api/v1/namespaces/ml/pods/p1"
    rv = api.get("Pod", "ml", "p1")["metadata"]["resourceVersion"]
    patch = {"metadata": {"resourceVersion": rv, "annotations": {"a": "1"}}}
    first = requests.patch(url, data=json.dumps(patch), headers=MERGE, timeout=5)
    assert first.status_code == 200
    assert first.json()["metadata"]["annotations"] == {"a": "1"}
    stale = requests.patch(url, data=json.dumps(patch), headers=MERGE, timeout=5)
    assert stale.status_code == 409
    again = requests.patch(url, data=json.dumps({"metadata": {"annotations": {"a": "1"}}}),
                           headers=MERGE, timeout=5)
    assert again.json()["metadata"]["resourceVersion"] == first.json()["metadata"][
        "resourceVersion"]
    assert api.write_count("PATCH", "/pods/p1") == 3


def test_json_patch_and_put_conflict(api: FakeKubeAPI) -> None:
    url = f"{api.url}/api/v1/namespaces/ml/pods/p1"
    ops = [{"op": "add", "path": "/metadata/annotations", "value": {"x/y": "1"}}]
    response = requests.patch(url, data=json.dumps(ops), timeout=5,
                              headers={"Content-Type": "application/json-patch+json"})
    assert response.json()["metadata"]["annotations"] == {"x/y": "1"}
    body = response.json()
    body["metadata"]["resourceVersion"] = "1"
    assert requests.put(url, data=json.dumps(body), timeout=5).status_code == 409


def test_watch_replays_history_then_streams_and_bookmarks(api: FakeKubeAPI) -> None:
    start = api.resource_version
    events: list[dict[str, Any]] = []
    thread = watch_lines(api, f"resourceVersion={start}&allowWatchBookmarks=true"
                         "&timeoutSeconds=1", events)
    api.modify("Pod", "ml", "p1", lambda pod: pod["metadata"].update(labels={"a": "b"}))
    api.delete("Pod", "ml", "p1")
    thread.join(timeout=5)
    types = [event["type"] for event in events]
    assert types[:2] == ["MODIFIED", "DELETED"]
    assert "BOOKMARK" in types
    assert int(events[-1]["object"]["metadata"]["resourceVersion"]) == api.resource_version


def test_compacted_history_answers_410(api: FakeKubeAPI) -> None:
    old = api.resource_version - 1
    api.compact()
    events: list[dict[str, Any]] = []
    watch_lines(api, f"resourceVersion={old}", events).join(timeout=5)
    assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
    api.gone_as_http = True
    response = requests.get(f"{api.url}/api/v1/pods?watch=1&resourceVersion={old}", timeout=5)
    assert response.status_code == 410


def test_faults_and_restart_keep_state(api: FakeKubeAPI) -> None:
    api.fail(503, count=1)
    assert requests.get(f"{api.url}/api/v1/nodes", timeout=5).status_code == 503
    assert requests.get(f"{api.url}/api/v1/nodes", timeout=5).status_code == 200
    port = api.port
    api.stop()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{api.url}/api/v1/nodes", timeout=1)
    api.start()
    assert api.port == port
    assert len(requests.get(f"{api.url}/api/v1/nodes", timeout=5).json()["items"]) == 1
