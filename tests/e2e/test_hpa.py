"""The real HPA controller of kube-controller-manager against poolguard's clamp.

kube-controller-manager runs `horizontal-pod-autoscaler-controller` as the ServiceAccount
kube-system/horizontal-pod-autoscaler (--use-service-account-credentials), syncing every
5 s. Its CPU metrics come from tests/e2e/fake_metrics.py, registered as the APIService
v1beta1.metrics.k8s.io: the aggregation layer proxies to the Service's ClusterIP, which
is on this machine (the Service range is on loopback), where the fake listens.

Every pod uses 1% of its CPU request, so the HPA wants minReplicas. poolguard lowers that
scale-down to the smallest safe count; once the placement allows (a cost fixed), a later
HPA sync goes the rest of the way. A person's scale of the same Deployment is still denied.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.controlplane import free_port, wait_for
from tests.e2e.harness import COST_ANNOTATION, COSTS, PY, Environment, is_active
from tests.e2e.workloads import apply, deployment, pod_template, wait_running, wait_settled
from tests.e2e.workloads import plan as plan_json

HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
METRICS = ("kube-system", "fake-metrics")  # the Service's namespace and name
API_SERVICE = "v1beta1.metrics.k8s.io"
MIN_REPLICAS = 2
CLAMPED = "clamp.poolguard.dev/clamped"  # the webhook's audit annotation


@dataclass
class MetricsAPI:
    requests: Path  # JSON lines: the path and X-Remote-User of every request served

    def users(self, path: str) -> set[str]:
        if not self.requests.exists():
            return set()
        lines = self.requests.read_text().splitlines()
        return {r["user"] for r in map(json.loads, lines) if r["path"] == path}


@pytest.fixture(scope="module", autouse=True)
def enforce(env: Environment) -> Iterator[None]:
    """A person's unsafe scale is denied: without the clamp, the HPA's would be too."""
    env.set_policy(enforcement="enforce")
    yield


def _metrics_objects(cluster_ip: str | None, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    namespace, name = METRICS
    service: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        # no selector: nothing but this EndpointSlice says where it runs
        "spec": {"ports": [{"name": "https", "port": port, "protocol": "TCP"}]}}
    if cluster_ip is None:
        return [service]
    endpoints = {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": namespace, "labels": {
            "kubernetes.io/service-name": name,
            "endpointslice.kubernetes.io/managed-by": "e2e.poolguard.dev"}},
        # The aggregator only checks that a ready endpoint exists; it sends the requests to
        # the ClusterIP. An endpoint may not be a loopback address: a pod IP stands in.
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.255.1"], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}
    api_service = {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": API_SERVICE},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                 "service": {"namespace": namespace, "name": name, "port": port},
                 "caBundle": ca_bundle, "groupPriorityMinimum": 100,
                 "versionPriority": 100}}
    return [service, endpoints, api_service]


def _available(env: Environment) -> bool:
    status = env.api_get(f"/apis/apiregistration.k8s.io/v1/apiservices/{API_SERVICE}")
    conditions = (status.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def metrics_api(env: Environment) -> Iterator[MetricsAPI]:
    """The fake metrics.k8s.io, Available through its APIService; removed afterwards (a
    dead APIService would break discovery for the tests that follow)."""
    namespace, name = METRICS
    home = env.run_dir / "fake-metrics"
    done = env.run([PY, "-m", "certs", "create", "--out-dir", home, "--service", name,
                    "--namespace", namespace])
    assert done.code == 0, str(done)
    port = free_port()
    text = "\n---\n".join(json.dumps(o) for o in _metrics_objects(None, port, ""))
    env.kubectl("apply", "-f", "-", stdin=text, check=True)
    cluster_ip = env.core.read_namespaced_service(name, namespace).spec.cluster_ip
    api = MetricsAPI(home / "requests.jsonl")
    env.plane.spawn("fake-metrics", [
        PY, "-m", "tests.e2e.fake_metrics", "--host", cluster_ip, "--port", str(port),
        "--cert", str(home / "tls.crt"), "--key", str(home / "tls.key"),
        "--client-ca", str(env.plane.pki / "front-proxy-ca.crt"),
        "--kubeconfig", str(env.plane.kubeconfig()), "--requests", str(api.requests)])
    ca_bundle = base64.b64encode((home / "ca.crt").read_bytes()).decode()
    objects = _metrics_objects(cluster_ip, port, ca_bundle)
    try:
        env.kubectl("apply", "-f", "-", stdin="\n---\n".join(map(json.dumps, objects)),
                    check=True)
        wait_for(f"APIService {API_SERVICE} to be Available", lambda: _available(env),
                 timeout=60, interval=0.5)
        yield api
    finally:
        env.kubectl("delete", "--ignore-not-found", "apiservice", API_SERVICE)
        env.kubectl("-n", namespace, "delete", "--ignore-not-found", "service,endpointslice",
                    name)
        env.plane.stop_process("fake-metrics")


def hpa(name: str) -> dict[str, Any]:
    """CPU at 50% of the requests; no downscale stabilization, so one sync scales down."""
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": name},
                 "minReplicas": MIN_REPLICAS, "maxReplicas": 6,
                 "metrics": [{"type": "Resource", "resource": {
                     "name": "cpu",
                     "target": {"type": "Utilization", "averageUtilization": 50}}}],
                 "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}}


def clamps(env: Environment, namespace: str, name: str) -> list[str]:
    """The clamp webhook's audit annotation on each of the HPA's scale writes, in order."""
    found = []
    for event in env.audit_events():
        ref = event.get("objectRef") or {}
        if (event.get("stage") == "ResponseComplete" and ref.get("namespace") == namespace
                and ref.get("name") == name and ref.get("subresource") == "scale"
                and event["user"]["username"] == HPA_USER):
            found.append((event.get("annotations") or {}).get(CLAMPED, ""))
    return found


def hpa_state(env: Environment, namespace: str, name: str) -> tuple[dict[str, Any],
                                                                     dict[str, str]]:
    """The HPA's status and its conditions as type -> "Status/Reason"."""
    obj = env.api_get(f"/apis/autoscaling/v2/namespaces/{namespace}/"
                      f"horizontalpodautoscalers/{name}")
    status = obj.get("status") or {}
    return status, {c["type"]: f"{c['status']}/{c.get('reason')}"
                    for c in status.get("conditions") or []}


def hpa_event_reasons(env: Environment, namespace: str, name: str) -> set[str]:
    events = env.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind=HorizontalPodAutoscaler,"
                                  f"involvedObject.name={name}").items
    return {e.reason for e in events}


def test_real_hpa_scales_down_as_far_as_is_safe_then_the_rest(
        env: Environment, metrics_api: MetricsAPI) -> None:
    ns = env.new_namespace("real-hpa")
    template = pod_template("asr", pools=["inference", "hybrid"], spread_pools=True)
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    apply(env, ns, deployment("asr", 6, template))
    pods = wait_running(env, ns, "app=asr", 6)
    pools = env.node_pool()
    by_pool = {pool: sorted(p["metadata"]["name"] for p in pods
                            if pools[p["spec"]["nodeName"]] == pool)
               for pool in ("inference", "hybrid")}
    assert len(by_pool["inference"]) == len(by_pool["hybrid"]) == 3, by_pool
    # a person's cost keeps one hybrid pod last: below 4 replicas an inference pod would go
    # while it survives
    held = by_pool["hybrid"][0]
    env.kubectl("-n", ns, "annotate", "--overwrite", "pod", held, f"{COST_ANNOTATION}=5000",
                check=True)
    wait_settled(env, ns)
    expected = plan_json(env, f"deployment/{ns}/asr", MIN_REPLICAS, "--as",
                         HPA_USER)["clampedTo"]
    assert expected == 4  # the two hybrid pods at the policy's cost, nothing more

    apply(env, ns, hpa("asr"))
    # the first sync asks 6 -> 2 and gets 4; a later one asks 4 -> 2 and stays at 4
    wait_for("two clamped HPA syncs", lambda: clamps(env, ns, "asr")[:2] == [
        f"6->{MIN_REPLICAS} became 6->{expected}",
        f"{expected}->{MIN_REPLICAS} became {expected}->{expected}"], timeout=60,
        interval=1.0)  # the audit log is read whole: it holds the earlier tests' events
    assert HPA_USER in metrics_api.users(f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods")
    assert env.apps.read_namespaced_deployment("asr", ns).spec.replicas == expected
    wait_settled(env, ns)
    left = sorted(p["metadata"]["name"] for p in env.pods(ns, "app=asr") if is_active(p))
    # only the two hybrid pods without the person's cost went: no inference pod was
    # deleted while a hybrid pod survived, and nothing was recreated
    assert left == sorted([*by_pool["inference"], held])
    status, conditions = hpa_state(env, ns, "asr")
    assert conditions["AbleToScale"] == "True/SucceededRescale", conditions
    assert conditions["ScalingActive"] == "True/ValidMetricFound", conditions
    assert status["desiredReplicas"] == MIN_REPLICAS, status
    assert "FailedRescale" not in hpa_event_reasons(env, ns, "asr")
    # a person asking the same of the same Deployment is still denied
    person = env.kubectl("-n", ns, "scale", "deployment/asr", f"--replicas={MIN_REPLICAS}")
    assert person.code != 0, str(person)
    assert 'admission webhook "scale.poolguard.dev" denied the request' in person.stderr
    assert env.apps.read_namespaced_deployment("asr", ns).spec.replicas == expected

    # the cost fixed to the policy's: the held pod goes first, so 2 is safe now
    env.kubectl("-n", ns, "annotate", "--overwrite", "pod", held,
                f"{COST_ANNOTATION}={COSTS['hybrid']}", check=True)
    wait_settled(env, ns)
    now = plan_json(env, f"deployment/{ns}/asr", MIN_REPLICAS, "--as", HPA_USER)
    assert now["allowed"] is True and now["clampedTo"] is None, now
    wait_for(f"the HPA to scale to {MIN_REPLICAS}", lambda: env.apps.read_namespaced_deployment(
        "asr", ns).spec.replicas == MIN_REPLICAS, timeout=60)
    wait_settled(env, ns)
    left = [p for p in env.pods(ns, "app=asr") if is_active(p)]
    assert len(left) == MIN_REPLICAS
    assert {p["metadata"]["name"] for p in left} < set(by_pool["inference"])
    wait_for("the HPA to see its target reached",
             lambda: hpa_state(env, ns, "asr")[0].get("currentReplicas") == MIN_REPLICAS,
             timeout=30)
    _, conditions = hpa_state(env, ns, "asr")
    assert conditions["AbleToScale"].startswith("True/"), conditions
    assert "FailedRescale" not in hpa_event_reasons(env, ns, "asr")
    env.kubectl("-n", ns, "delete", "hpa", "asr", check=True)
