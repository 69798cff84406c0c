"""A stand-in for the kubelets of the fake Nodes: makes bound pods Running and Ready and
finishes the deletion of terminating pods (nothing else would: there is no kubelet).

Runs as its own process with its own identity (`e2e-fake-kubelet`):
    python -m tests.e2e.fake_kubelet --kubeconfig RUN_DIR/fake-kubelet.kubeconfig

Pods labelled `e2e.poolguard.dev/manual-status: "true"` are not started: the
differential driver writes their status itself (phase, readiness, restarts, ages).
Terminating pods are force-deleted (grace 0) everywhere.

`pod_status` is also used by the driver to build statuses.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
import threading
import time
import zlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

MANUAL_LABEL = "e2e.poolguard.dev/manual-status"
STRATEGIC = "application/strategic-merge-patch+json"
log = logging.getLogger("fake-kubelet")


def rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_ip(uid: str) -> str:
    """A stable, valid pod IP derived from the pod's uid."""
    n = zlib.crc32(uid.encode()) & 0xFFFF
    return f"10.244.{n >> 8}.{n & 0xFF or 1}"


def pod_status(pod: Mapping[str, Any], *, phase: str = "Running", ready: bool = True,
               ready_since: dt.datetime | None = None, restarts: int = 0,
               sidecar_restarts: int = 0, started: dt.datetime | None = None) -> dict[str, Any]:
    """A kubelet-like status for `pod` (a dict): containers running, Ready as asked."""
    now = dt.datetime.now(dt.UTC)
    since = rfc3339(ready_since or now)
    start = rfc3339(started or now)
    spec, uid = pod["spec"], pod["metadata"]["uid"]
    running = phase == "Running"
    container_ready = running and ready

    def container(c: Mapping[str, Any], count: int, is_ready: bool) -> dict[str, Any]:
        state = ({"running": {"startedAt": start}} if running
                 else {"waiting": {"reason": "ContainerCreating"}})
        return {"name": c["name"], "image": c["image"], "imageID": "", "ready": is_ready,
                "started": running, "restartCount": count, "state": state,
                "containerID": f"fake://{uid}/{c['name']}" if running else None}

    def init_container(c: Mapping[str, Any]) -> dict[str, Any]:
        if c.get("restartPolicy") == "Always":  # a sidecar: runs beside the containers
            return container(c, sidecar_restarts, running)
        return {"name": c["name"], "image": c["image"], "imageID": "", "ready": True,
                "restartCount": 0, "containerID": f"fake://{uid}/{c['name']}",
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                         "startedAt": start, "finishedAt": start}}}

    def condition(kind: str, status: bool, when: str) -> dict[str, Any]:
        return {"type": kind, "status": "True" if status else "False",
                "lastTransitionTime": when, "lastProbeTime": None}

    status: dict[str, Any] = {
        "phase": phase, "startTime": start,
        "hostIP": "10.1.0.1", "hostIPs": [{"ip": "10.1.0.1"}],
        "conditions": [condition("PodScheduled", True, start),
                       condition("Initialized", True, start),
                       condition("ContainersReady", container_ready, since),
                       condition("Ready", container_ready, since)],
        "containerStatuses": [container(c, restarts, container_ready)
                              for c in spec["containers"]],
    }
    if spec.get("initContainers"):
        status["initContainerStatuses"] = [init_container(c) for c in spec["initContainers"]]
    if running:
        ip = pod_ip(uid)
        status.update(podIP=ip, podIPs=[{"ip": ip}])
    return status


def to_start(pod: Mapping[str, Any]) -> bool:
    """Bound, never started, not terminating, and not left to the differential driver."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    return bool(spec.get("nodeName") and not status.get("startTime")
                and status.get("phase", "Pending") == "Pending"
                and not meta.get("deletionTimestamp")
                and (meta.get("labels") or {}).get(MANUAL_LABEL) != "true")


class FakeKubelet:
    """List+watch all pods; start bound ones, force-delete terminating ones."""

    def __init__(self, api: client.ApiClient, workers: int = 8) -> None:
        self.core = client.CoreV1Api(api)
        self.pool = ThreadPoolExecutor(workers)
        self.busy: set[str] = set()
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            try:
                self._list_and_watch()
            except Exception as err:
                log.warning("watch interrupted (%s); listing again", err)
                time.sleep(0.5)

    def _list_and_watch(self) -> None:
        version = self._list()
        while True:  # a watch that timed out resumes where it was; only an ERROR relists
            response = self.core.list_pod_for_all_namespaces(
                watch=True, resource_version=version, allow_watch_bookmarks=True,
                timeout_seconds=120, _preload_content=False, _request_timeout=(5, 150))
            try:
                for line in response:
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        return  # 410 Gone and friends: list again
                    version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.submit(event["object"])
            finally:
                response.release_conn()

    def _list(self) -> str:
        """List every pod in pages (one unpaged LIST of 20,000 pods outlives the API
        server's 60 s request timeout on a loaded machine); the list's resourceVersion."""
        token = None
        while True:
            page = json.loads(self.core.list_pod_for_all_namespaces(
                limit=500, _continue=token, _preload_content=False).data)
            for pod in page["items"]:
                self.submit(pod)
            token = page["metadata"].get("continue")
            if not token:
                return str(page["metadata"]["resourceVersion"])

    def submit(self, pod: dict[str, Any]) -> None:
        if pod["metadata"].get("deletionTimestamp"):
            action = self.force_delete
        elif to_start(pod):
            action = self.start
        else:
            return
        key = f"{pod['metadata']['uid']}/{action.__name__}"
        with self.lock:
            if key in self.busy:
                return
            self.busy.add(key)
        self.pool.submit(self._guarded, key, action, pod)

    def _guarded(self, key: str, action: Any, pod: dict[str, Any]) -> None:
        try:
            action(pod)
        except ApiException as err:
            if err.status not in (404, 409):
                log.warning("%s %s/%s: %s", action.__name__, pod["metadata"]["namespace"],
                            pod["metadata"]["name"], err.reason)
        except Exception as err:
            log.warning("%s: %s", action.__name__, err)
        finally:
            with self.lock:
                self.busy.discard(key)

    def start(self, pod: dict[str, Any], attempts: int = 10) -> None:
        """Mark the pod Running, only if it is still the version that asked for it: an
        event handled late (the pool is busy) must not overwrite a status someone wrote
        since, or start a pod that is terminating by now. On a conflict, decide again on
        the pod as it is now."""
        for _ in range(attempts):
            meta = pod["metadata"]
            try:
                self.core.patch_namespaced_pod_status(
                    meta["name"], meta["namespace"],
                    {"metadata": {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
                     "status": pod_status(pod)},
                    _content_type=STRATEGIC)
                return
            except ApiException as err:
                if err.status != 409:
                    raise
            pod = json.loads(self.core.read_namespaced_pod(
                meta["name"], meta["namespace"], _preload_content=False).data)
            if pod["metadata"]["uid"] != meta["uid"] or not to_start(pod):
                return

    def force_delete(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self.core.delete_namespaced_pod(
            meta["name"], meta["namespace"], grace_period_seconds=0,
            body=client.V1DeleteOptions(grace_period_seconds=0,
                                        preconditions=client.V1Preconditions(uid=meta["uid"])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--workers", type=int, default=8,
                        help="concurrent API calls (bench-scale raises it: each call waits "
                        "seconds on a loaded API server)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    configuration = client.Configuration()
    config.load_kube_config(config_file=args.kubeconfig, client_configuration=configuration)
    # one connection per worker (the pool is sized when the ApiClient is made)
    configuration.connection_pool_maxsize = max(args.workers, 10)
    FakeKubelet(client.ApiClient(configuration), workers=args.workers).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
