"""LeaderWorkerSets and the objects their controller creates, named and labelled as it does.

From sigs.k8s.io/lws v0.10.0 (the same in v0.9.0, which the e2e tier builds and verifies
against): the leader StatefulSet `<lws>` (Parallel, replicas and the replicas annotation
from the LeaderWorkerSet), leader pods `<lws>-<g>` (labels name, worker-index "0", group-
index, group-key, template-revision-hash), one worker StatefulSet `<lws>-<g>` per leader,
controlled by the leader pod (Parallel, `size - 1` replicas, ordinals from 1), worker pods
`<lws>-<g>-<w>` (worker-index w).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from tests.support import factories as f
from webhook.core.leaderworkerset.leader_worker_set import (
    GROUP_INDEX_LABEL,
    REPLICAS_ANNOTATION,
    REVISION_LABEL,
    SET_NAME_LABEL,
    WORKER_INDEX_LABEL,
)

GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"
REVISION = "5d8f7c9b6"


def leader_worker_set(name: str, namespace: str = "ml", replicas: int = 3, size: int = 2, *,
                      max_surge: int | str = 0, max_unavailable: int | str = 1,
                      partition: int = 0) -> dict[str, Any]:
    """A LeaderWorkerSet as the API server returns it, defaults filled in."""
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": namespace, "uid": f.uid_for(f"lws/{name}"),
                     "creationTimestamp": f.T0, "generation": 1},
        "spec": {"replicas": replicas, "startupPolicy": "LeaderCreated",
                 "leaderWorkerTemplate": {"size": size,
                                          "restartPolicy": "RecreateGroupOnPodRestart",
                                          "workerTemplate": f.template(name)},
                 "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                     "maxSurge": max_surge, "maxUnavailable": max_unavailable,
                     "partition": partition}},
                 "networkConfig": {"subdomainPolicy": "Shared"}},
        "status": {"replicas": replicas,
                   "hpaPodSelector": f"{SET_NAME_LABEL}={name},{WORKER_INDEX_LABEL}=0"},
    }


def leader_statefulset(lws: dict[str, Any], replicas: int | None = None,
                       partition: int = 0, revision: str = REVISION) -> dict[str, Any]:
    """The leader StatefulSet `constructLeaderStatefulSetApplyConfiguration` writes."""
    name, namespace = lws["metadata"]["name"], lws["metadata"]["namespace"]
    lws_replicas = lws["spec"]["replicas"]
    replicas = lws_replicas if replicas is None else replicas
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "uid": f.uid_for(f"sts/{name}"),
                     "creationTimestamp": f.T0, "ownerReferences": [f.owner_ref(lws)],
                     "labels": {SET_NAME_LABEL: name, REVISION_LABEL: revision},
                     "annotations": {REPLICAS_ANNOTATION: str(lws_replicas)}},
        "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {SET_NAME_LABEL: name, WORKER_INDEX_LABEL: "0"}},
                 "template": f.template(name),
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                     "partition": partition, "maxUnavailable": 1}}},
        "status": {"replicas": replicas, "availableReplicas": replicas},
    }


def group(lws: dict[str, Any], leader_sts: dict[str, Any], index: int, nodes: Sequence[str],
          *, ready: bool = True, revision: str = REVISION,
          workers_ready: bool | None = None) -> list[dict[str, Any]]:
    """Group `index`: its leader pod on `nodes[0]`, a worker StatefulSet and its workers on
    `nodes[1:]` (len(nodes) == size; size 1 has no worker StatefulSet)."""
    name, namespace = lws["metadata"]["name"], lws["metadata"]["namespace"]
    size = lws["spec"]["leaderWorkerTemplate"]["size"]
    assert len(nodes) == size
    leader_name = f"{name}-{index}"
    key = hashlib.sha1(f"{namespace}/{leader_name}".encode()).hexdigest()
    leader = f.pod(leader_name, namespace, nodes[0], owner=leader_sts, ready=ready,
                   labels={GROUP_INDEX_LABEL: str(index), GROUP_KEY_LABEL: key,
                           REVISION_LABEL: revision},
                   annotations={SIZE_ANNOTATION: str(size)})
    if size == 1:
        return [leader]
    workers_ready = ready if workers_ready is None else workers_ready
    selector = {GROUP_INDEX_LABEL: str(index), SET_NAME_LABEL: name, GROUP_KEY_LABEL: key}
    workers = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": leader_name, "namespace": namespace,
                     "uid": f.uid_for(f"sts/{leader_name}"), "creationTimestamp": f.T0,
                     "ownerReferences": [f.owner_ref(leader)],
                     "labels": {**selector, REVISION_LABEL: revision}},
        "spec": {"replicas": size - 1, "serviceName": name, "podManagementPolicy": "Parallel",
                 "ordinals": {"start": 1}, "selector": {"matchLabels": selector},
                 "template": f.template(name)},
        "status": {"replicas": size - 1,
                   "availableReplicas": size - 1 if workers_ready else 0,
                   "currentRevision": f"{leader_name}-abc", "updateRevision": f"{leader_name}-abc"},
    }
    pods = [f.pod(f"{leader_name}-{w}", namespace, nodes[w], owner=workers, ready=workers_ready,
                  labels={REVISION_LABEL: revision, WORKER_INDEX_LABEL: str(w)},
                  annotations={SIZE_ANNOTATION: str(size), LEADER_NAME_ANNOTATION: leader_name})
            for w in range(1, size)]
    return [leader, workers, *pods]


def lws_state(layout: Sequence[Sequence[str]], *, name: str = "llm", replicas: int | None = None,
              sts_replicas: int | None = None, **lws_options: Any
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A LeaderWorkerSet whose group g runs on the nodes `layout[g]` (leader first), with
    its leader StatefulSet, worker StatefulSets and pods: (lws, every object)."""
    size = len(layout[0]) if layout else 1
    lws = leader_worker_set(name, replicas=len(layout) if replicas is None else replicas,
                            size=size, **lws_options)
    leader_sts = leader_statefulset(lws, replicas=sts_replicas)
    objects: list[dict[str, Any]] = [lws, leader_sts]
    for index, nodes in enumerate(layout):
        objects += group(lws, leader_sts, index, nodes)
    return lws, objects
