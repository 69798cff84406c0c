"""poolguard installed with its Helm chart (charts/poolguard, default values) into the
control plane, after the kustomize install has done its scenarios and the differential:
the chart's hook Jobs make the certificates, the API server calls the webhooks through the
chart's Service, `helm upgrade` switches the enforcement, the chart's reconciler repairs
what the webhook missed, the renewal CronJob's command renews a certificate with its own
RBAC, and `helm uninstall` takes it away. How Jobs and pods run without a kubelet:
tests/e2e/helm.py.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from certs import pki
from tests.e2e.controlplane import free_port, wait_for
from tests.e2e.harness import COST_ANNOTATION, Environment, Result, annotations, has_pool_cost
from tests.e2e.helm import (
    CHART,
    HELM,
    RELEASE,
    HelmRun,
    LocalPod,
    https_status,
    run_helm,
    run_pod_to_completion,
    served_certificate,
)
from tests.e2e.test_scenarios import bare_pod, pool_of, set_ready, spread_deployment
from tests.e2e.workloads import apply, deployment, pod_template, wait_running, wait_settled

NAMESPACE = "poolguard-system"  # not the kustomize install's: its deletion may still run
SERVICE = "poolguard-webhook"
SECRET = "poolguard-webhook-tls"
RENEWAL = "poolguard-certs-renewal"
HOOK_JOBS = ["poolguard-certs-secret", "poolguard-certs-ca-bundle"]
CONFIGURATIONS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")


@dataclass
class Install:
    """The Helm release and the local stand-ins for its pods."""

    env: Environment
    installed: HelmRun
    webhook: LocalPod
    reconciler: LocalPod
    cluster_ip: str
    port: int
    uninstalled: bool = False

    @property
    def server_name(self) -> str:
        return f"{SERVICE}.{NAMESPACE}.svc"  # what the API server verifies

    def secret(self, name: str = SECRET) -> dict[str, bytes]:
        data = self.env.api_get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}")["data"]
        return {k: base64.b64decode(v) for k, v in data.items()}

    def start_webhook(self) -> None:
        self.webhook.start()

        def ready() -> bool:
            self.webhook.check_alive()
            return https_status(self.cluster_ip, self.port, "/readyz", self.server_name,
                                self.secret()["ca.crt"]) == 200

        wait_for("serve on the Service's ClusterIP to be ready", ready, timeout=90)

    def helm(self, *args: str) -> Result:
        return self.env.run([HELM, *args, "--namespace", NAMESPACE, "--kubeconfig",
                             self.env.plane.kubeconfig()])


def _assert_helm_ok(run: HelmRun) -> None:
    jobs = "\n".join(f"--- job {j.name} (exit {j.code}):\n{j.output}" for j in run.jobs)
    assert run.result.code == 0, f"{run.result}\n{jobs}"
    assert [j.name for j in run.jobs] == HOOK_JOBS, jobs
    assert all(j.code == 0 for j in run.jobs), jobs


@pytest.fixture(scope="module")
def chart(env: Environment) -> Iterator[Install]:
    env.uninstall_poolguard()  # the chart makes the same cluster-scoped objects
    installed = run_helm(env, "install", RELEASE, str(CHART), "--create-namespace",
                         namespace=NAMESPACE)
    _assert_helm_ok(installed)

    def read(kind: str, name: str) -> dict[str, Any]:
        group = "/api/v1" if kind == "services" else "/apis/apps/v1"
        return env.api_get(f"{group}/namespaces/{NAMESPACE}/{kind}/{name}")

    service = read("services", SERVICE)
    cluster_ip, port = service["spec"]["clusterIP"], service["spec"]["ports"][0]["port"]
    install = Install(
        env, installed,
        LocalPod(env, read("deployments", "poolguard-webhook"),
                 ["--host", cluster_ip, "--port", str(port)]),
        LocalPod(env, read("deployments", "poolguard-reconciler"),
                 ["--metrics-port", str(free_port())]),
        cluster_ip, port)
    try:
        install.start_webhook()
        yield install
    finally:
        install.webhook.stop()
        install.reconciler.stop()
        if not install.uninstalled:
            install.helm("uninstall", RELEASE, "--wait=false")


def _webhook_configurations(env: Environment) -> list[dict[str, Any]]:
    return [env.api_get(f"/apis/admissionregistration.k8s.io/v1/{r}/poolguard")
            for r in CONFIGURATIONS]


def test_helm_install_runs_the_certificate_hooks_and_deletes_them(
        env: Environment, chart: Install) -> None:
    secret_job, bundle_job = chart.installed.jobs
    assert f"Secret {NAMESPACE}/{SECRET}: created" in secret_job.output, secret_job.output
    assert "caBundle written into 2 webhooks" in bundle_job.output, bundle_job.output
    status = json.loads(chart.helm("status", RELEASE, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"

    secret = chart.secret()
    certificate = x509.load_pem_x509_certificate(secret["tls.crt"])
    names = certificate.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert names == pki.service_dns_names(SERVICE, NAMESPACE)
    assert secret["ca.crt"] == chart.secret(f"{SECRET}-ca")["ca.crt"]
    assert pki.needs_renewal(secret["tls.crt"], secret["ca.crt"])[0] is False
    bundle = base64.b64encode(secret["ca.crt"]).decode()
    for configuration in _webhook_configurations(env):
        for hook in configuration["webhooks"]:
            assert hook["clientConfig"]["caBundle"] == bundle, hook["name"]
            assert hook["clientConfig"]["service"]["namespace"] == NAMESPACE
            assert hook["clientConfig"]["service"]["name"] == SERVICE
            assert "url" not in hook["clientConfig"]
    # hook-delete-policy hook-succeeded: the hooks' ServiceAccount and Jobs are gone
    assert not env.api_get(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs")["items"]
    assert _status(env, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/poolguard-certs") == 404


def test_pods_get_their_cost_from_the_webhook_behind_the_chart_service(
        env: Environment, chart: Install) -> None:
    """A pod pinned to a pool gets its cost at create (pods webhook); the scheduler's
    bindings carry the cost of the node's pool (bindings webhook)."""
    ns = env.new_namespace("helm-pods")
    created = json.loads(env.kubectl("-n", ns, "create", "-o", "json", "-f", "-", check=True,
                                     stdin=json.dumps(bare_pod("pinned", pool="inference")))
                         .stdout)
    assert annotations(created)[COST_ANNOTATION] == "1000"
    apply(env, ns, deployment("batch", 2, pod_template("batch", pools=["hybrid"])))
    for pod in wait_running(env, ns, "app=batch", 2):
        assert pool_of(env, pod) == "hybrid"
        assert has_pool_cost(pod, "hybrid")
    chart.webhook.check_alive()


def test_scale_down_is_denied_then_warned_after_helm_upgrade_sets_warn(
        env: Environment, chart: Install) -> None:
    ns = env.new_namespace("helm-guarded")
    pods = spread_deployment(env, ns, "web", 6)
    unready = next(p for p in pods if pool_of(env, p) == "inference")
    set_ready(env, unready, False)
    wait_settled(env, ns)
    name = unready["metadata"]["name"]

    denied = env.kubectl("-n", ns, "scale", "deployment/web", "--replicas=5")
    assert denied.code != 0, str(denied)
    assert 'admission webhook "scale.poolguard.dev" denied the request' in denied.stderr
    assert name in denied.stderr

    upgraded = run_helm(env, "upgrade", RELEASE, str(CHART), "--reuse-values", "--set",
                        "enforcement=warn", namespace=NAMESPACE)
    _assert_helm_ok(upgraded)  # the hooks run again, and change nothing
    assert "no renewal needed" in upgraded.jobs[0].output
    assert "caBundle already current" in upgraded.jobs[1].output
    chart.webhook.sync_volumes()  # the kubelet brings the new ConfigMap into the pod

    def warned() -> Any:
        result = env.kubectl("-n", ns, "scale", "deployment/web", "--replicas=5")
        return result if result.code == 0 else None  # denied until serve re-reads the file

    result = wait_for("the scale-down to pass with warnings", warned, timeout=30, interval=1)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    assert any("poolguard [protectedLast]" in w and name in w for w in warnings), result.stderr


def test_chart_reconciler_sets_the_costs_the_webhook_missed(
        env: Environment, chart: Install) -> None:
    chart.webhook.stop()  # failurePolicy Ignore: pods are created without a cost
    try:
        ns = env.new_namespace("helm-repair")
        apply(env, ns, deployment("late", 2, pod_template("late", pools=["hybrid"])))
        pods = wait_running(env, ns, "app=late", 2)
        assert all(COST_ANNOTATION not in annotations(p) for p in pods)
        chart.reconciler.start()
        wait_for("the reconciler to set the hybrid cost", lambda: all(
            has_pool_cost(p, "hybrid") for p in env.pods(ns, "app=late")),
            timeout=60)
        lease = env.api_get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/"
                            "poolguard-reconciler")
        assert lease["spec"]["holderIdentity"].startswith(chart.reconciler.pod_name())
    finally:
        chart.reconciler.stop()
        chart.start_webhook()


def _foreign_serving_pair() -> dict[str, bytes]:
    """A certificate for the right names from another CA (what the renewal must replace)."""
    ca_key, ca_cert = pki.generate_ca(days=30)
    key, cert = pki.generate_serving_cert(ca_key, ca_cert,
                                          pki.service_dns_names(SERVICE, NAMESPACE), days=30)
    return {"tls.crt": cert, "tls.key": key}


def _status(env: Environment, path: str) -> int:
    """The HTTP status of a GET as the admin (404: gone)."""
    response = env.api.call_api(*env.api.param_serialize(
        "GET", path, header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"]))
    response.read()
    return response.status


def test_renewal_cronjob_renews_the_certificate_with_its_own_rbac(
        env: Environment, chart: Install) -> None:
    """The CronJob's command, run as its ServiceAccount: a no-op while the certificate is
    good; a renewal when it is not; serve picks the new certificate up from the volume."""
    cronjob = env.api_get(f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs/{RENEWAL}")
    pod_spec = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    account = f"system:serviceaccount:{NAMESPACE}:{pod_spec['serviceAccountName']}"
    quiet = run_pod_to_completion(env, NAMESPACE, pod_spec, "renewal-1")
    assert quiet.code == 0, quiet.output
    assert "no renewal needed" in quiet.output and "caBundle already current" in quiet.output
    for verb, what in (("create", "secrets"), ("get", "secrets/other"), ("list", "secrets"),
                       ("delete", f"secrets/{SECRET}")):
        can = env.kubectl("auth", "can-i", verb, what, "-n", NAMESPACE, f"--as={account}")
        assert can.stdout.strip() == "no", (verb, what, str(can))

    bundle_before = [h["clientConfig"]["caBundle"] for c in _webhook_configurations(env)
                     for h in c["webhooks"]]
    foreign = _foreign_serving_pair()
    env.core.patch_namespaced_secret(SECRET, NAMESPACE, {"data": {
        k: base64.b64encode(v).decode() for k, v in foreign.items()}})
    renewed = run_pod_to_completion(env, NAMESPACE, pod_spec, "renewal-2")
    assert renewed.code == 0, renewed.output
    assert f"Secret {NAMESPACE}/{SECRET}: renewed" in renewed.output, renewed.output
    secret = chart.secret()
    assert secret["tls.crt"] != foreign["tls.crt"]
    assert pki.needs_renewal(secret["tls.crt"], chart.secret(f"{SECRET}-ca")["ca.crt"],
                             key_pem=secret["tls.key"])[0] is False
    assert [h["clientConfig"]["caBundle"] for c in _webhook_configurations(env)
            for h in c["webhooks"]] == bundle_before  # same CA: nothing to inject

    chart.webhook.sync_volumes()
    new_der = x509.load_pem_x509_certificate(secret["tls.crt"]).public_bytes(
        serialization.Encoding.DER)
    wait_for("serve to present the renewed certificate", lambda: served_certificate(
        chart.cluster_ip, chart.port, chart.server_name, secret["ca.crt"]) == new_der,
        timeout=30)
    ns = env.new_namespace("helm-renewed")
    created = json.loads(env.kubectl("-n", ns, "create", "-o", "json", "-f", "-", check=True,
                                     stdin=json.dumps(bare_pod("after", pool="hybrid"))).stdout)
    assert annotations(created)[COST_ANNOTATION] == "-100"  # the API server trusts it


def test_helm_uninstall_removes_the_webhooks_and_keeps_the_hook_secrets(
        env: Environment, chart: Install) -> None:
    chart.webhook.stop()
    result = chart.helm("uninstall", RELEASE, "--wait")
    assert result.code == 0, str(result)
    chart.uninstalled = True
    for resource in CONFIGURATIONS:
        assert _status(env, f"/apis/admissionregistration.k8s.io/v1/{resource}/poolguard") == 404
    assert not env.api_get(f"/apis/batch/v1/namespaces/{NAMESPACE}/cronjobs")["items"]
    # made by the hook, not by the release: docs/install.md says to delete them by hand
    assert chart.secret()["tls.crt"] and chart.secret(f"{SECRET}-ca")["ca.key"]
