"""A state with one workload of each custom kind beside the example's, as `plan` reads it.

Shared by the plan tests that go through every kind (names, look-ups, one answer).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support import cloneset_factories as cf
from tests.support import factories as f
from tests.support.kubeapi.helpers import items_of
from tests.support.lws_factories import leader_worker_set
from tests.support.rollouts import rollout as argo_rollout
from webhook.cluster.state import EXAMPLE_STATE

LWS_LABEL = "leaderworkerset.sigs.k8s.io/name"


def lws_objects(replicas: int) -> list[dict]:
    """A LeaderWorkerSet with its leader StatefulSet and one group's worker StatefulSet,
    owned as the LeaderWorkerSet controller owns them."""
    lws = leader_worker_set("llm", replicas=replicas)
    leaders = f.statefulset("llm", replicas=2)
    leaders["metadata"]["labels"] = {LWS_LABEL: "llm"}
    leaders["metadata"]["ownerReferences"] = [f.owner_ref(lws)]
    leader_pod = f.pod("llm-0", labels={LWS_LABEL: "llm"}, owner=leaders)
    workers = f.statefulset("llm-0", replicas=1)
    workers["metadata"]["labels"] = {LWS_LABEL: "llm"}
    workers["metadata"]["ownerReferences"] = [f.owner_ref({**leader_pod, "apiVersion": "v1"})]
    return [lws, leaders, leader_pod, workers]


def rollout_objects(replicas: int) -> list[dict]:
    ro = argo_rollout("canary", replicas)
    stable = f.replicaset("canary-5d8", replicas=2, owner=ro)
    other_group = {**argo_rollout("other", 3), "apiVersion": "example.com/v1"}
    return [ro, stable, other_group]


def cloneset_objects(replicas: int) -> list[dict]:
    """A CloneSet and its pods, one on each pool's node of the example state."""
    clone = cf.cloneset("llm-clone", replicas=replicas)
    return [clone, *(cf.clone_pod(clone, f"llm-clone-{i}", node)
                     for i, node in enumerate(("gpu-inf-1", "gpu-hyb-1")[:replicas]))]


def custom_kinds_state(tmp_path: Path) -> Path:
    """The example state plus a LeaderWorkerSet (2 groups), an Argo Rollout (3 replicas,
    and another API group's `Rollout`) and a CloneSet (2 replicas), written to a file."""
    path = tmp_path / "state.yaml"
    objects = [*items_of(yaml.safe_load_all(EXAMPLE_STATE.read_text())),
               *lws_objects(2), *rollout_objects(3), *cloneset_objects(2)]
    path.write_text(yaml.safe_dump(f.kube_list(*objects)))
    return path
