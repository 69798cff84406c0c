"""Scale-downs that controllers make, against the real control plane: a ReplicaSet owned by
an Argo Rollout and a StatefulSet owned by a LeaderWorkerSet, shrunk by clients with those
controllers' identities, are never denied; a client with the HPA's identity is clamped to
the safe count; a person's unsafe kubectl scale of a Deployment is still denied.

The owners are objects of the real CRDs (the Rollout's from the Argo Rollouts module, the
LeaderWorkerSet's from sigs.k8s.io/lws) whose controllers do not run here: what matters to
poolguard is the controller ownerReference and who sends the request. The real LWS
controller's own writes are checked in tests/e2e/test_leaderworkerset.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e import lws
from tests.e2e.controlplane import kubeconfig_text, wait_for
from tests.e2e.fake_kubelet import STRATEGIC, pod_status
from tests.e2e.harness import COST_ANNOTATION, Environment, api_client, install_crds, is_active
from tests.e2e.rollouts import ROLLOUTS_MODULE
from tests.e2e.workloads import (
    apply,
    deployment,
    pod_template,
    replicaset,
    statefulset,
    wait_running,
    wait_settled,
)
from tests.e2e.workloads import plan as plan_json

ROLLOUTS = ("argo-rollouts", "argo-rollouts")  # (namespace, ServiceAccount)
LWS = lws.ACCOUNT
HPA = ("kube-system", "horizontal-pod-autoscaler")
OWNER_KINDS = {  # CRD name -> (group, version, kind, plural)
    "rollouts.argoproj.io": ("argoproj.io", "v1alpha1", "Rollout", "rollouts"),
}


@pytest.fixture(scope="module", autouse=True)
def enforce(env: Environment) -> Iterator[None]:
    env.set_policy(enforcement="enforce")
    yield


@pytest.fixture(scope="module")
def owner_kinds(env: Environment) -> None:
    """The owners' CRDs: the real Rollout CRD (installed once per cluster)."""
    install_crds(env, ROLLOUTS_MODULE)


@pytest.fixture(scope="module")
def lws_kind(env: Environment) -> None:
    """The real LeaderWorkerSet CRD (installed once per cluster)."""
    install_crds(env, lws.LWS_MODULE)


def lws_owner(env: Environment, ns: str, name: str) -> dict[str, Any]:
    """A LeaderWorkerSet of one group of one pod, and the controller ownerReference to it."""
    apply(env, ns, lws.leader_worker_set(name, 1, 1))
    uid = json.loads(env.kubectl("-n", ns, "get", lws.CRD, name, "-o", "json",
                                 check=True).stdout)["metadata"]["uid"]
    return {"apiVersion": lws.API, "kind": "LeaderWorkerSet", "name": name, "uid": uid,
            "controller": True}


def identity(env: Environment, namespace: str, account: str,
             cluster_role: str | None = "cluster-admin") -> Path:
    """A kubeconfig that authenticates as ServiceAccount `namespace/account`."""
    if env.kubectl("get", "namespace", namespace).code != 0:
        env.kubectl("create", "namespace", namespace, check=True)
    if env.kubectl("-n", namespace, "get", "serviceaccount", account).code != 0:
        env.kubectl("-n", namespace, "create", "serviceaccount", account, check=True)
    binding = f"e2e-{namespace}-{account}"
    if cluster_role and env.kubectl("get", "clusterrolebinding", binding).code != 0:
        env.kubectl("create", "clusterrolebinding", binding, f"--clusterrole={cluster_role}",
                    f"--serviceaccount={namespace}:{account}", check=True)
    token = env.kubectl("-n", namespace, "create", "token", account, "--duration=1h",
                        check=True).stdout.strip()
    path = env.run_dir / f"{namespace}-{account}.kubeconfig"
    path.write_text(kubeconfig_text(env.plane.server, env.plane.pki / "ca.crt",
                                    f"system:serviceaccount:{namespace}:{account}",
                                    token=token))
    return path


def owner(env: Environment, ns: str, crd: str, name: str) -> dict[str, Any]:
    """An owner object of a CRD kind, and the controller ownerReference to it."""
    group, version, kind, _ = OWNER_KINDS[crd]
    apply(env, ns, {"apiVersion": f"{group}/{version}", "kind": kind,
                    "metadata": {"name": name}, "spec": {"replicas": 1}})
    uid = json.loads(env.kubectl("-n", ns, "get", crd, name, "-o", "json",
                                 check=True).stdout)["metadata"]["uid"]
    return {"apiVersion": f"{group}/{version}", "kind": kind, "name": name, "uid": uid,
            "controller": True}


def make_unready(env: Environment, pod: dict[str, Any]) -> None:
    """What a kubelet reports when a readiness probe starts failing."""
    meta = pod["metadata"]
    env.core.patch_namespaced_pod_status(
        meta["name"], meta["namespace"], {"status": pod_status(pod, ready=False)},
        _content_type=STRATEGIC)


def first_inference(env: Environment, pods: list[dict[str, Any]]) -> dict[str, Any]:
    pools = env.node_pool()
    return next(p for p in pods if pools[p["spec"]["nodeName"]] == "inference")


def unsafe_replicaset(env: Environment, ns: str, name: str, owner_ref: dict[str, Any] | None
                      ) -> None:
    """6 pods over both pools with an unready inference pod: the first one to go."""
    template = pod_template(name, pools=["inference", "hybrid"], spread_pools=True)
    rs = replicaset(name, 6, template)
    if owner_ref is not None:
        rs["metadata"]["ownerReferences"] = [owner_ref]
    apply(env, ns, rs)
    pods = wait_running(env, ns, f"app={name}", 6)
    make_unready(env, first_inference(env, pods))
    wait_settled(env, ns)


def test_rollouts_controller_shrinking_its_replicaset_is_not_denied(
        env: Environment, owner_kinds: None) -> None:
    ns = env.new_namespace("rollout-owned")
    unsafe_replicaset(env, ns, "canary-1", owner(env, ns, "rollouts.argoproj.io", "canary"))
    assert plan_json(env, f"rs/{ns}/canary-1", 5)["allowed"] is False  # unsafe for a person
    rollouts = identity(env, *ROLLOUTS)
    # the Rollouts controller writes its ReplicaSets' spec.replicas (rollout/sync.go)
    result = env.kubectl("-n", ns, "patch", "rs", "canary-1", "--type=merge", "-p",
                         '{"spec":{"replicas":5}}', kubeconfig=rollouts)
    assert result.code == 0, str(result)
    assert (f"poolguard: allowed unchecked: ReplicaSet {ns}/canary-1 is sized by its owner "
            "Rollout canary") in result.stderr
    assert env.apps.read_namespaced_replica_set("canary-1", ns).spec.replicas == 5
    # and a person's direct scale: allowed, told that the owner will undo it
    person = env.kubectl("-n", ns, "scale", "rs/canary-1", "--replicas=4")
    assert person.code == 0, str(person)
    assert "managed by Rollout canary, which will undo a direct scale" in person.stderr


def test_lws_controller_shrinking_its_leader_statefulset_is_not_denied(
        env: Environment, lws_kind: None) -> None:
    ns = env.new_namespace("lws-owned")
    ref = lws_owner(env, ns, "llm")
    # llm-0 on a hybrid node, then llm-1 and llm-2 on inference nodes: a scale to 2 removes
    # llm-2 (the highest ordinal) while llm-0 survives outside the protected pool
    sts = statefulset("llm", 1, pod_template("llm", pools=["hybrid"]))
    sts["metadata"]["ownerReferences"] = [ref]
    sts["spec"]["updateStrategy"] = {"type": "OnDelete"}
    apply(env, ns, sts)
    wait_running(env, ns, "app=llm", 1)
    sts["spec"]["replicas"], sts["spec"]["template"] = 3, pod_template("llm", pools=["inference"])
    apply(env, ns, sts)
    wait_running(env, ns, "app=llm", 3)
    wait_settled(env, ns)
    assert plan_json(env, f"sts/{ns}/llm", 2)["allowed"] is False  # unsafe for a person
    result = env.kubectl("-n", ns, "scale", "sts/llm", "--replicas=2",
                         kubeconfig=identity(env, *LWS))
    assert result.code == 0, str(result)
    assert "sized by its owner LeaderWorkerSet llm" in result.stderr
    wait_for("the StatefulSet to shrink to 2",
             lambda: env.apps.read_namespaced_stateful_set("llm", ns).status.replicas == 2)


def test_hpa_identity_is_clamped_and_a_persons_scale_still_denied(env: Environment) -> None:
    ns = env.new_namespace("clamped")
    template = pod_template("asr", pools=["inference", "hybrid"], spread_pools=True)
    apply(env, ns, deployment("asr", 6, template))
    pods = wait_running(env, ns, "app=asr", 6)
    pools = env.node_pool()
    hybrid = [p for p in pods if pools[p["spec"]["nodeName"]] == "hybrid"]
    # a person's cost on one hybrid pod keeps it last: below 4 replicas an inference pod
    # goes while it survives
    env.kubectl("-n", ns, "annotate", "--overwrite", "pod", hybrid[0]["metadata"]["name"],
                f"{COST_ANNOTATION}=5000", check=True)
    wait_settled(env, ns)
    person = env.kubectl("-n", ns, "scale", "deployment/asr", "--replicas=2")
    assert person.code != 0, str(person)
    assert 'admission webhook "scale.poolguard.dev" denied the request' in person.stderr
    assert env.apps.read_namespaced_deployment("asr", ns).spec.replicas == 6
    # the HPA's identity (its bootstrap RBAC may update */scale): clamped, not denied
    hpa_user = f"system:serviceaccount:{HPA[0]}:{HPA[1]}"
    expected = plan_json(env, f"deployment/{ns}/asr", 2, "--as", hpa_user)["clampedTo"]
    assert expected is not None and 2 < expected < 6
    # a PUT on /scale, as the HPA sends it
    hpa = client.AppsV1Api(api_client(identity(env, *HPA, cluster_role=None)))
    scale = hpa.read_namespaced_deployment_scale("asr", ns)
    scale.spec.replicas = 2
    answer = hpa.replace_namespaced_deployment_scale("asr", ns, scale)
    assert answer.spec.replicas == expected
    assert env.apps.read_namespaced_deployment("asr", ns).spec.replicas == expected
    wait_settled(env, ns)
    left = [p for p in env.pods(ns, "app=asr") if is_active(p)]
    assert len(left) == expected
    # only hybrid pods went: every inference pod is still there
    assert sum(pools[p["spec"]["nodeName"]] == "inference" for p in left) == 3
