"""Argo Rollouts objects in the shape the Rollouts controller writes them (v1.10).

rollout/sync.go `createDesiredReplicaSet`: a ReplicaSet is named `<rollout>-<hash>`,
carries the template labels plus `rollouts-pod-template-hash`, selects on both, is
controlled by the Rollout, and has the `rollout.argoproj.io/revision` and
`rollout.argoproj.io/desired-replicas` annotations (utils/annotations); old ReplicaSets
kept up for a while have `scale-down-deadline` (rollout/replicaset.go `addScaleDownDelay`).
The Rollout's status names the new ReplicaSet (`currentPodHash`), the stable one
(`stableRS`) and, for blue-green, the Services' selectors.
"""

from __future__ import annotations

from typing import Any

from tests.support import factories as f

API_VERSION = "argoproj.io/v1alpha1"
HASH_LABEL = "rollouts-pod-template-hash"


def rollout(name: str, replicas: int, *, canary: dict[str, Any] | None = None,
            blue_green: dict[str, Any] | None = None, current: str = "",
            stable: str = "", step: int | None = None, namespace: str = "ml",
            status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    """A Rollout whose controller has synced (observedGeneration = generation)."""
    strategy = {"blueGreen": blue_green} if blue_green is not None else {
        "canary": canary if canary is not None else {}}
    full_status: dict[str, Any] = {"observedGeneration": str(generation),
                                   "currentPodHash": current, "stableRS": stable,
                                   "replicas": replicas, **(status or {})}
    if step is not None:
        full_status["currentStepIndex"] = step
    return {"apiVersion": API_VERSION, "kind": "Rollout",
            "metadata": {"name": name, "namespace": namespace,
                         "uid": f.uid_for(f"rollout/{namespace}/{name}"),
                         "generation": generation, "creationTimestamp": f.T0},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": f.template(name), "strategy": strategy},
            "status": full_status}


def replicaset(owner: dict[str, Any], pod_hash: str, replicas: int, *, revision: int,
               available: int | None = None, desired: int | None = None,
               deadline: str | None = None, created: str | None = None) -> dict[str, Any]:
    """A ReplicaSet the Rollouts controller created for `owner` (its `pod_hash`)."""
    app = owner["spec"]["selector"]["matchLabels"]["app"]
    namespace = owner["metadata"]["namespace"]
    name = f"{owner['metadata']['name']}-{pod_hash}"
    labels = {"app": app, HASH_LABEL: pod_hash}
    annotations = {"rollout.argoproj.io/revision": str(revision),
                   "rollout.argoproj.io/desired-replicas": str(
                       owner["spec"]["replicas"] if desired is None else desired)}
    if deadline is not None:
        annotations["scale-down-deadline"] = deadline
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace,
                         "uid": f.uid_for(f"rs/{namespace}/{name}"),
                         "creationTimestamp": created or f"2026-01-{revision + 1:02d}T00:00:00Z",
                         "labels": labels, "annotations": annotations,
                         "ownerReferences": [f.owner_ref(owner)]},
            "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)},
                                  "spec": f.template(app)["spec"]}},
            "status": {"replicas": replicas, "observedGeneration": 1,
                       "availableReplicas": replicas if available is None else available,
                       "readyReplicas": replicas if available is None else available}}
