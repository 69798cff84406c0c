"""One scale-down matrix for the twin tests: policies, a cluster state and the scales asked.

Policies cover the three enforcement modes, namespace and pod selectors, integer and
percentage minimums; the workloads are Deployments steady and mid-rollout, a ReplicaSet,
a StatefulSet, the skip label on a workload, its template and its namespace.
"""

from __future__ import annotations

from typing import Any

from tests.support import factories as f
from webhook.core.deployment.deployment_util import MAX_REPLICAS_ANNOTATION

SKIP = {"poolguard.dev/skip": "true"}
POOLS = [{"name": "inference", "deletionCost": 1000, "protected": True},
         {"name": "hybrid", "deletionCost": -100}]
POLICIES: dict[str, dict[str, Any]] = {  # each rule, mode, selector and minimum somewhere
    "enforce": {},
    "warn-percent": {"scaleDown": {"enforcement": "warn", "protectedLast": False,
                                   "minProtectedReplicas": "50%"}},
    "dryrun": {"scaleDown": {"enforcement": "dryrun"}},
    "selectors-integer": {
        "namespaceSelector": {"matchLabels": {"team": "ml"}},
        "podSelector": {"matchExpressions": [{"key": "tier", "operator": "In",
                                              "values": ["online"]}]},
        "scaleDown": {"minProtectedReplicas": 2}},
}


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name,
                                                  **labels}}}


def steady(name: str, ns: str, placements: list[tuple[str, str | None]], *,
           labels: dict[str, str] | None = None,
           template_labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A Deployment with one ReplicaSet and pods on (node, cost) placements."""
    deployment = f.deployment(name, ns, replicas=len(placements))
    deployment["spec"]["template"]["metadata"]["labels"].update(
        {"tier": "online", **(template_labels or {})})
    if labels:
        deployment["metadata"]["labels"] = labels
    rs = f.replicaset(f"{name}-1", ns, replicas=len(placements), owner=deployment,
                      pod_hash="1")
    rs["spec"]["template"] = deployment["spec"]["template"]
    pods = [f.pod(f"{name}-1-{i}", ns, node, owner=rs, cost=cost,
                  labels=deployment["spec"]["template"]["metadata"]["labels"],
                  ready_time=f"2026-01-01T00:00:{i:02d}Z")
            for i, (node, cost) in enumerate(placements)]
    return [deployment, rs, *pods]


def rolling() -> list[dict[str, Any]]:
    """Mid-rollout, no costs yet: some sync order removes a protected pod (test_rollout)."""
    deployment = f.deployment("rolling", "ml", replicas=5, max_surge=0, max_unavailable=1)
    deployment["spec"]["template"]["metadata"]["labels"]["tier"] = "online"
    objects: list[dict[str, Any]] = [deployment]
    for rs_name, nodes, image, created in (
            ("rolling-old", ["inf-1", "hyb-1"], "example/serve:0", "2026-01-01T00:00:00Z"),
            ("rolling-new", ["inf-1", "hyb-1", "hyb-1"], "example/serve:1",
             "2026-01-02T00:00:00Z")):
        rs = f.replicaset(rs_name, "ml", replicas=len(nodes), owner=deployment, image=image,
                          pod_hash=rs_name, created=created,
                          annotations={MAX_REPLICAS_ANNOTATION: "5"})
        objects.append(rs)
        objects += [f.pod(f"{rs_name}-{i}", "ml", node, owner=rs, labels={"tier": "online"},
                          ready_time=f"2026-01-01T00:00:{i:02d}Z")
                    for i, node in enumerate(nodes)]
    return objects


def solo_replicaset() -> list[dict[str, Any]]:
    rs = f.replicaset("solo", "ml", replicas=3)
    rs["spec"]["template"]["metadata"]["labels"]["tier"] = "online"
    return [rs, *[f.pod(f"solo-{i}", "ml", node, owner=rs, labels={"tier": "online"})
                  for i, node in enumerate(["inf-1", "inf-1", "hyb-1"])]]


def statefulset() -> list[dict[str, Any]]:
    sts = f.statefulset("kv", "ml", replicas=3)
    sts["spec"]["template"]["metadata"]["labels"]["tier"] = "online"
    return [sts, *[f.pod(f"kv-{i}", "ml", node, owner=sts, labels={"tier": "online"})
                   for i, node in enumerate(["hyb-1", "inf-1", "inf-2"])]]


UNCOSTED = [("inf-1", None), ("inf-1", None), ("hyb-1", None)]  # rank 2 on inf-1 goes first
COSTED = [("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "-100"), ("hyb-2", "-100")]
HAND_SET = [("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "5000")]  # hybrid kept by hand
# below 3 an inference pod goes while the hand-set hybrid pod survives: an autoscaler's
# scale to 1 or 2 is clamped to 3
CLAMPABLE = [("hyb-1", "-100"), ("inf-1", "1000"), ("inf-2", "1000"), ("hyb-2", "5000")]
STATE = [
    namespace("ml", {"team": "ml"}), namespace("batch", {"team": "batch"}),
    namespace("frozen", SKIP),
    f.node("inf-1", "inference"), f.node("inf-2", "inference"), f.node("hyb-1", "hybrid"),
    f.node("hyb-2", "hybrid"),
    *steady("uncosted", "ml", UNCOSTED),
    *steady("costed", "ml", COSTED),
    *steady("hand-set", "ml", HAND_SET),
    *steady("clampable", "ml", CLAMPABLE),
    *steady("labelled-skip", "ml", UNCOSTED, labels=SKIP),
    *steady("template-skip", "ml", UNCOSTED, template_labels=SKIP),
    *steady("trainer", "batch", UNCOSTED, template_labels={"tier": "batch"}),
    *steady("frozen-app", "frozen", UNCOSTED),
    *rolling(), *solo_replicaset(), *statefulset(),
]
# (resource, namespace, name, current replicas, targets)
CASES = [
    ("deployments", "ml", "uncosted", 3, [2, 1, 0]),
    ("deployments", "ml", "costed", 4, [3, 2, 1]),
    ("deployments", "ml", "hand-set", 3, [2, 1]),
    ("deployments", "ml", "clampable", 4, [3, 2, 1]),
    ("deployments", "ml", "labelled-skip", 3, [2]),
    ("deployments", "ml", "template-skip", 3, [2]),
    ("deployments", "batch", "trainer", 3, [2]),
    ("deployments", "frozen", "frozen-app", 3, [2]),
    ("deployments", "ml", "rolling", 5, [4, 2]),
    ("replicasets", "ml", "solo", 3, [2, 1]),
    ("statefulsets", "ml", "kv", 3, [2, 1]),
]
KIND = {"deployments": "deploy", "replicasets": "rs", "statefulsets": "sts"}
