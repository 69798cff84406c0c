"""LeaderWorkerSet and Argo Rollout objects as their API servers store them, minimal.

Enough for reading and routing (the cache, state files, `plan`'s look-ups, admission):
the fields the controllers' CRDs require and the ones poolguard reads first.
"""

from __future__ import annotations

from typing import Any

from .factories import T0, template, uid_for

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
ROLLOUT_API_VERSION = "argoproj.io/v1alpha1"


def leaderworkerset(name: str, namespace: str = "ml", replicas: int = 2,
                    size: int = 2) -> dict[str, Any]:
    """A LeaderWorkerSet of `replicas` groups of `size` pods (a leader and size-1 workers)."""
    return {"apiVersion": LWS_API_VERSION, "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": namespace,
                         "uid": uid_for(f"lws/{namespace}/{name}"), "creationTimestamp": T0,
                         "generation": 1},
            "spec": {"replicas": replicas, "startupPolicy": "LeaderCreated",
                     "leaderWorkerTemplate": {"size": size, "workerTemplate": template(name)}},
            "status": {"replicas": replicas,
                       "hpaPodSelector": f"leaderworkerset.sigs.k8s.io/name={name},"
                                         "leaderworkerset.sigs.k8s.io/worker-index=0"}}


def rollout(name: str, namespace: str = "ml", replicas: int = 3,
            api_version: str = ROLLOUT_API_VERSION) -> dict[str, Any]:
    """An Argo Rollout with a basic canary strategy."""
    return {"apiVersion": api_version, "kind": "Rollout",
            "metadata": {"name": name, "namespace": namespace,
                         "uid": uid_for(f"ro/{namespace}/{name}"), "creationTimestamp": T0,
                         "generation": 1},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": template(name),
                     "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}}},
            "status": {"replicas": replicas, "HPAReplicas": replicas,
                       "selector": f"app={name}"}}
