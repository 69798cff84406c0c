"""What the e2e tests of the real HPA share: the fake `metrics.k8s.io` behind its APIService,
the HorizontalPodAutoscaler manifest, and the HPA's scale writes as the audit log shows them.

kube-controller-manager runs `horizontal-pod-autoscaler-controller` as the ServiceAccount
kube-system/horizontal-pod-autoscaler (--use-service-account-credentials), syncing every
5 s. Its CPU metrics come from tests/e2e/fake_metrics.py, registered as the APIService
v1beta1.metrics.k8s.io: the aggregation layer proxies to the Service's ClusterIP, which
is on this machine (the Service range is on loopback), where the fake listens.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.controlplane import free_port, wait_for
from tests.e2e.harness import PY, Environment

HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
METRICS = ("kube-system", "fake-metrics")  # the Service's namespace and name
API_SERVICE = "v1beta1.metrics.k8s.io"
CLAMP_WEBHOOK = "clamp.poolguard.dev"
CLAMPED = f"{CLAMP_WEBHOOK}/clamped"  # the webhook's audit annotation
# The API server records every mutating webhook it called under this prefix (audit level
# Metadata), with whether the webhook changed the object.
MUTATION_PREFIX = "mutation.webhook.admission.k8s.io/"


@dataclass
class MetricsAPI:
    requests: Path  # JSON lines: the path and X-Remote-User of every request served

    def users(self, path: str) -> set[str]:
        if not self.requests.exists():
            return set()
        lines = self.requests.read_text().splitlines()
        return {r["user"] for r in map(json.loads, lines) if r["path"] == path}


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


@contextlib.contextmanager
def serve_metrics(env: Environment) -> Iterator[MetricsAPI]:
    """The fake metrics.k8s.io, Available through its APIService; removed afterwards (a
    dead APIService would break discovery for the tests that follow). Each module that
    needs it starts it again: the certificates are made anew (--force) and the Service,
    which keeps its ClusterIP, is applied again."""
    namespace, name = METRICS
    home = env.run_dir / "fake-metrics"
    done = env.run([PY, "-m", "certs", "create", "--out-dir", home, "--force",
                    "--service", name, "--namespace", namespace])
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


def hpa(name: str, min_replicas: int, max_replicas: int) -> dict[str, Any]:
    """CPU at 50% of the requests; no downscale stabilization, so one sync scales down."""
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": name},
                 "minReplicas": min_replicas, "maxReplicas": max_replicas,
                 "metrics": [{"type": "Resource", "resource": {
                     "name": "cpu",
                     "target": {"type": "Utilization", "averageUtilization": 50}}}],
                 "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}}


@dataclass(frozen=True)
class ScaleWrite:
    """One of the HPA's writes on a target's /scale, as the audit log records it."""

    code: int
    clamp_called: bool  # the API server called clamp.poolguard.dev for it
    mutated: bool  # ... and the webhook changed the count
    clamped: str  # the webhook's audit annotation ("6->2 became 6->4"), "" when unchanged
    reason: str = ""  # the API server's reason for a failed write ("Conflict"), else ""


def scale_writes(env: Environment, namespace: str, name: str) -> list[ScaleWrite]:
    """The HPA's writes on the /scale of `namespace/name`, in order (the audit log is read
    whole: it holds the earlier tests' events too)."""
    found = []
    for event in env.audit_events():
        ref = event.get("objectRef") or {}
        if (event.get("stage") != "ResponseComplete" or ref.get("namespace") != namespace
                or ref.get("name") != name or ref.get("subresource") != "scale"
                or event["user"]["username"] != HPA_USER):
            continue
        notes = event.get("annotations") or {}
        calls = [json.loads(v) for k, v in notes.items() if k.startswith(MUTATION_PREFIX)]
        clamp = [c for c in calls if c.get("webhook") == CLAMP_WEBHOOK]
        status = event.get("responseStatus") or {}
        found.append(ScaleWrite(
            code=int(status.get("code", 0)), clamp_called=bool(clamp),
            mutated=any(c.get("mutated") for c in clamp), clamped=notes.get(CLAMPED, ""),
            reason=status.get("reason") or ""))
    return found


def clamps(env: Environment, namespace: str, name: str) -> list[str]:
    """The clamp webhook's audit annotation on each of the HPA's scale writes that took
    effect, in order. A write that lost a race with the Deployment controller's status
    update (409 Conflict, retried by the HPA in the same sync) was reviewed too and carries
    the same annotation as its retry: counted, it would stand in for the next sync's write."""
    return [write.clamped for write in scale_writes(env, namespace, name) if write.code == 200]


def hpa_state(env: Environment, namespace: str, name: str) -> tuple[dict[str, Any],
                                                                     dict[str, str]]:
    """The HPA's status and its conditions as type -> "Status/Reason"."""
    obj = env.api_get(f"/apis/autoscaling/v2/namespaces/{namespace}/"
                      f"horizontalpodautoscalers/{name}")
    status = obj.get("status") or {}
    return status, {c["type"]: f"{c['status']}/{c.get('reason')}"
                    for c in status.get("conditions") or []}


def hpa_event_reasons(env: Environment, namespace: str, name: str) -> set[str]:
    """The reasons of the Events the HPA controller recorded on the HPA."""
    events = env.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind=HorizontalPodAutoscaler,"
                                  f"involvedObject.name={name}").items
    return {e.reason for e in events}


@contextlib.contextmanager
def scale_down_held(env: Environment, namespace: str, name: str) -> Iterator[None]:
    """The HPA `namespace/name` kept from scaling its target down for the block
    (`behavior.scaleDown.selectPolicy: Disabled`), then given its manifest's policy back.

    The HPA must be asking for fewer replicas than its target has: its status then shows
    ScalingLimited True/ScaleDownLimit, which only a sync that read the hold writes. The
    syncs of one HPA never overlap and each later one reads the hold too, so from then on
    no scale-down write of this HPA is under way or to come: what a test reads of the
    target inside the block is the state the HPA's next sync after the block starts from."""
    def patch(select_policy: str | None) -> None:
        body = {"spec": {"behavior": {"scaleDown": {"selectPolicy": select_policy}}}}
        env.kubectl("-n", namespace, "patch", "hpa", name, "--type=merge",
                    "-p", json.dumps(body), check=True)

    patch("Disabled")
    try:
        wait_for(f"the HPA {name} to hold its scale-down",
                 lambda: hpa_state(env, namespace, name)[1].get("ScalingLimited")
                 == "True/ScaleDownLimit", timeout=30, interval=0.5)
        yield
    finally:
        patch(None)  # unset: the API server defaults it as it did the manifest's
