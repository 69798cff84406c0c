"""The MutatingAdmissionPolicy fallback on the real control plane, with no webhook serving.

`python -m webhook policy admission-policy` is applied as a user would; `serve` and the
reconciler are stopped, so every cost a pod carries here was written by the API server:
a pod pinned to the inference pool gets 1000 and poolguard's markers, a person's explicit
cost is kept, pods in kube-system or in a skip-labelled namespace get nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.controlplane import wait_for
from tests.e2e.harness import COST_ANNOTATION, POOL_LABEL, Environment, annotations

MANAGED = "poolguard.dev/managed-deletion-cost"
POOL = "poolguard.dev/pool"


@pytest.fixture(scope="module")
def namespace(env: Environment) -> Iterator[str]:
    """A governed namespace, with the admission policy applied and no webhook serving."""
    reconciling = env.reconciler is not None
    env.stop_serve()
    env.stop_reconciler()
    name = env.new_namespace(f"map-{uuid.uuid4().hex[:6]}")
    generated = env.poolguard("policy", "admission-policy", env.policy_file)
    assert generated.code == 0, str(generated)
    env.kubectl("apply", "-f", "-", stdin=generated.stdout, check=True)
    try:
        # The API server picks up new policies, bindings and params from its informers.
        wait_for("the admission policy to take effect",
                 lambda: COST_ANNOTATION in annotations(_create(env, name, dry_run=True,
                                                                selector="inference")),
                 timeout=60, interval=0.5)
        yield name
    finally:
        env.kubectl("delete", "--ignore-not-found", "-f", "-", stdin=generated.stdout)
        env.delete_namespace(name)
        env.start_serve()
        if reconciling:
            env.start_reconciler()


def _pod(name: str, selector: str | None = None, affinity: str | None = None,
         cost: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.k8s.io/pause"}]}
    if selector:
        spec["nodeSelector"] = {POOL_LABEL: selector}
    if affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": POOL_LABEL, "operator": "In", "values": [affinity]}]}]}}}
    metadata: dict[str, Any] = {"name": name}
    if cost is not None:
        metadata["annotations"] = {COST_ANNOTATION: cost}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _create(env: Environment, namespace: str, dry_run: bool = False,
            **kwargs: str) -> dict[str, Any]:
    """A pod created through the API server (dry-run runs admission too); the stored pod."""
    name = f"p-{uuid.uuid4().hex[:8]}"
    created = env.core.create_namespaced_pod(
        namespace, _pod(name, **kwargs), dry_run="All" if dry_run else None)
    return client.ApiClient().sanitize_for_serialization(created)


def test_pod_pinned_by_node_selector_gets_the_pool_cost_and_markers(
        env: Environment, namespace: str) -> None:
    pod = _create(env, namespace, selector="inference")
    assert {k: v for k, v in annotations(pod).items() if k in (COST_ANNOTATION, MANAGED, POOL)
            } == {COST_ANNOTATION: "1000", MANAGED: "1000", POOL: "inference"}


def test_pod_pinned_by_required_affinity_gets_the_pool_cost(
        env: Environment, namespace: str) -> None:
    pod = _create(env, namespace, affinity="hybrid")
    assert annotations(pod)[COST_ANNOTATION] == "-100"
    assert annotations(pod)[POOL] == "hybrid"


def test_unlisted_pool_gets_the_default_cost(env: Environment, namespace: str) -> None:
    pod = _create(env, namespace, selector="training")
    assert annotations(pod)[COST_ANNOTATION] == "0"
    assert annotations(pod)[POOL] == "training"


def test_explicit_cost_is_kept_without_markers(env: Environment, namespace: str) -> None:
    pod = _create(env, namespace, selector="inference", cost="7")
    assert annotations(pod)[COST_ANNOTATION] == "7"
    assert MANAGED not in annotations(pod) and POOL not in annotations(pod)


def test_unpinned_pod_gets_nothing(env: Environment, namespace: str) -> None:
    assert COST_ANNOTATION not in annotations(_create(env, namespace))


def test_kube_system_and_skip_labelled_namespaces_get_nothing(
        env: Environment, namespace: str) -> None:
    skipped = env.new_namespace(f"map-skip-{uuid.uuid4().hex[:6]}",
                                {"poolguard.dev/skip": "true"})
    try:
        for where in ("kube-system", skipped):
            pod = _create(env, where, dry_run=True, selector="inference")
            assert COST_ANNOTATION not in annotations(pod), where
    finally:
        env.delete_namespace(skipped)


def test_documented_dry_run_probe_prints_the_annotations(env: Environment,
                                                         namespace: str) -> None:
    """docs/install.md's check that the policy is in force, as written there."""
    probe = env.kubectl("-n", namespace, "run", "probe", "--image=registry.k8s.io/pause",
                        "--dry-run=server", "--overrides",
                        '{"spec": {"nodeSelector": {"node.usage": "inference"}}}',
                        "-o", "jsonpath={.metadata.annotations}", check=True)
    assert '"controller.kubernetes.io/pod-deletion-cost":"1000"' in probe.stdout, str(probe)
