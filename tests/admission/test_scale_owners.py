"""Replica changes of workloads another controller sizes, over real HTTPS.

A ReplicaSet owned by an Argo Rollout and a StatefulSet owned by a LeaderWorkerSet are
sized by their owners: whoever shrinks them (the owner's controller or a person) is
allowed, told who owns the workload, and counted. A Deployment's own scale is still judged.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
import yaml

from tests.support import factories as f
from tests.support import reviews
from tests.support.serving import admission_response, running_server, verifying_session

ROLLOUTS = {"username": "system:serviceaccount:argo-rollouts:argo-rollouts",
            "groups": ["system:serviceaccounts", "system:authenticated"]}
LWS = {"username": "system:serviceaccount:lws-system:lws-controller-manager",
       "groups": ["system:serviceaccounts", "system:authenticated"]}


def _owner(api_version: str, kind: str, name: str) -> dict:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "uid": f.uid_for(f"{kind}/{name}")},
            "spec": {"selector": {"matchLabels": {"app": name}}}}


def owned_state() -> list[dict]:
    """Workloads whose shrink by one removes an inference pod while a hybrid pod survives."""
    nodes = [f.node("inf-1", "inference"), f.node("hyb-1", "hybrid")]
    deploy = f.deployment("svc", replicas=3)
    rs = f.replicaset("svc-1", owner=deploy, replicas=3, pod_hash="1")
    rollout = _owner("argoproj.io/v1alpha1", "Rollout", "canary")
    canary = f.replicaset("canary-5d8", owner=rollout, replicas=3)
    lws = _owner("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "llm")
    leaders = f.statefulset("llm", replicas=3)
    leaders["metadata"]["ownerReferences"] = [f.owner_ref(lws)]
    pods = []
    for owner, prefix in ((rs, "svc-1"), (canary, "canary-5d8")):
        # no costs: two pods share inf-1, so the ranking removes an inference pod first
        pods += [f.pod(f"{prefix}-a", node_name="inf-1", owner=owner),
                 f.pod(f"{prefix}-b", node_name="inf-1", owner=owner),
                 f.pod(f"{prefix}-c", node_name="hyb-1", owner=owner)]
    # the highest ordinal goes first: llm-2 on the inference pool, llm-0 on hybrid survives
    pods += [f.pod(f"llm-{i}", node_name=node, owner=leaders)
             for i, node in enumerate(("hyb-1", "inf-1", "inf-1"))]
    return [*nodes, deploy, rs, canary, leaders, *pods]


@contextmanager
def serve_owned_state(directory: Path) -> Iterator[tuple[str, requests.Session]]:
    """`serve` on owned_state(); yields (url, session)."""
    state = directory / "state.yaml"
    state.write_text(yaml.safe_dump(f.kube_list(*owned_state())))
    with running_server(directory, "--state", str(state)) as (url, ca, _process):
        session = verifying_session(ca)
        yield url, session


SERVER = serve_owned_state  # the `server` fixture (conftest.py)


def post(server, body: dict) -> dict:
    return admission_response(server, "/validate-scale", body)


def state_object(kind: str, name: str) -> dict:
    return copy.deepcopy(next(o for o in owned_state()
                              if o["kind"] == kind and o["metadata"]["name"] == name))


@pytest.mark.parametrize("user", [ROLLOUTS, reviews.ADMIN], ids=["rollouts-controller", "person"])
def test_rollout_owned_replicaset_shrink_is_never_denied(server, user):
    old = state_object("ReplicaSet", "canary-5d8")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    response = post(server, reviews.workload_update(old, new, user=user))
    assert response["allowed"] is True and "status" not in response
    warnings = response["warnings"]
    assert warnings[0].startswith("poolguard: allowed unchecked: ReplicaSet ml/canary-5d8 is "
                                  "sized by its owner Rollout canary")
    assert any("managed by Rollout canary, which will undo a direct scale" in w
               for w in warnings)
    assert all(len(w) <= 256 and "\n" not in w for w in warnings)


@pytest.mark.parametrize("user", [LWS, reviews.ADMIN], ids=["lws-controller", "person"])
def test_leaderworkerset_owned_statefulset_scale_is_never_denied(server, user):
    response = post(server, reviews.scale("statefulsets", "llm", 3, 2, user=user))
    assert response["allowed"] is True
    assert any("sized by its owner LeaderWorkerSet llm" in w for w in response["warnings"])


def test_deployment_scale_by_a_person_is_still_denied(server):
    response = post(server, reviews.scale("deployments", "svc", 3, 2))
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert "[protectedLast]" in response["status"]["message"]


def test_deployment_owned_replicaset_is_still_judged(server):
    old = state_object("ReplicaSet", "svc-1")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 2
    response = post(server, reviews.workload_update(old, new))
    assert response["allowed"] is False and "[protectedLast]" in response["status"]["message"]
    exempt = post(server, reviews.workload_update(old, new, user=reviews.DEPLOYMENT_CONTROLLER))
    assert exempt == {"uid": exempt["uid"], "allowed": True}


def test_owner_decided_writes_are_counted_by_kind_and_owner(server):
    post(server, reviews.scale("replicasets", "canary-5d8", 3, 1, user=ROLLOUTS))
    url, session = server
    text = session.get(url + "/metrics", timeout=10).text
    assert ('poolguard_scale_owner_decided_total{kind="ReplicaSet",owner_kind="Rollout"}'
            in text)
    assert ('poolguard_scale_owner_decided_total{kind="StatefulSet",'
            'owner_kind="LeaderWorkerSet"}' in text)
