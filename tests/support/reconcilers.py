"""The reconciler as its tests run it: against the fake API server, in a thread, on a
client whose user agent names the candidate, with timings short enough for a test."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from kubernetes import client as k8s

from tests.support.kubeapi.server import FakeKubeAPI
from webhook.cluster.kubeclient import api_client_from
from webhook.cluster.live import LiveCluster
from webhook.core.policy.policy import Policy
from webhook.core.view.resource import NAMESPACES, NODES, PODS
from webhook.reconciler.options import Options
from webhook.reconciler.service import Service

# Leases of a second, no rate limit to speak of, no resync during a test.
FAST = Options(qps=1000, burst=1000, lease_duration=1, renew_deadline=0.5, retry_period=0.05,
               resync_seconds=3600, identity="a")
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}


@contextlib.contextmanager
def fake_api(*objects: dict[str, Any]) -> Iterator[FakeKubeAPI]:
    """The fake API server holding the namespace `ml` and `objects`; its watches send
    bookmarks every 50 ms, so a watcher's resourceVersion keeps up within a test."""
    with FakeKubeAPI(bookmark_interval=0.05) as server:
        server.put(NAMESPACE, *objects)
        yield server


def client_for(kubeconfig: str, identity: str) -> k8s.ApiClient:
    """A client of `kubeconfig` whose user agent is `test/IDENTITY` (the fake server's
    log tells the candidates' writes apart by it)."""
    api = api_client_from(kubeconfig)
    api.user_agent = f"test/{identity}"
    return api


@contextlib.contextmanager
def running(client: k8s.ApiClient, policy: Policy, options: Options,
            **service: Any) -> Iterator[Service]:
    """The long-running reconciler on `client` (its watch-fed cache retries fast), in a
    thread; stopped and the client closed on exit. `service` goes to `Service` as is."""
    cluster = LiveCluster(client, (PODS, NODES, NAMESPACES), backoff_initial=0.02,
                          backoff_max=0.1)
    reconciler = Service(client, policy, options, cluster=cluster, out=lambda line: None,
                         **service)
    stop = threading.Event()
    thread = threading.Thread(target=reconciler.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield reconciler
    finally:
        stop.set()
        thread.join(timeout=10)
        client.close()
