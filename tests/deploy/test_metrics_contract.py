"""The metrics contract: what the alerts and the dashboard use is what the programs serve.

The webhook is started exactly as users start it: `make run` (same command line, the
test's own environment, nothing added), and with the shipped Deployment's arguments
against a (fake) cluster. The reconciler is started with the shipped Deployment's
arguments and environment. Each /metrics is scraped as Prometheus would (HTTPS with the
private CA for the webhook) after the README's example requests, and must not be empty;
every metric name in charts/poolguard/files/{prometheus-rules.yaml,grafana-dashboard.json}
must be among the served samples.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from tests.support.kubeapi.helpers import items_of
from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.serving import stop_group

REPO = Path(__file__).resolve().parents[2]
FILES = REPO / "charts" / "poolguard" / "files"
CERTS = REPO / ".certs"  # make run's CERT_DIR
KUBECTL = shutil.which("kubectl")
METRIC_NAME = re.compile(r"\bpoolguard_[a-z0-9_]+")
# The reconciler's metrics: poolguard_reconciler_*, and the per-writer count of pods whose
# deletion cost another controller owns and the free nodes per pool (only the reconciler
# sees every pod), and the rebalancer's moves (it runs in the reconciler).
RECONCILER_METRICS = re.compile(
    r"poolguard_reconciler_|poolguard_foreign_cost_pods$|poolguard_pool_free_nodes$"
    r"|poolguard_rebalance_")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def used_metric_names() -> dict[str, set[str]]:
    """Metric names in the alert expressions and the dashboard queries, by file."""
    rules = yaml.safe_load((FILES / "prometheus-rules.yaml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    dashboard = json.loads((FILES / "grafana-dashboard.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    return {"prometheus-rules.yaml": set(METRIC_NAME.findall(" ".join(exprs))),
            "grafana-dashboard.json": set(METRIC_NAME.findall(" ".join(queries)))}


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)] from an exposition page."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def wait_for(url: str, process: subprocess.Popen[str], log: Path, **kwargs: Any) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            pytest.fail(f"exited with {process.returncode}:\n{log.read_text()}")
        try:
            if requests.get(url, timeout=2, **kwargs).status_code == 200:
                return
        except (requests.RequestException, OSError):
            pass  # not listening yet, or make run has not written the CA file yet
        assert time.monotonic() < deadline, f"{url} did not answer 200:\n{log.read_text()}"
        time.sleep(0.2)


@contextmanager
def started(command: list[str], log: Path, env: dict[str, str] | None = None,
            cwd: Path = REPO) -> Iterator[subprocess.Popen[str]]:
    """Run `command` in its own process group; stop the whole group afterwards."""
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        yield process
    finally:
        stop_group(process)


def scrape_webhook(base: str, ca: Path, times: int = 6) -> str:
    """/metrics as Prometheus scrapes it: a new HTTPS connection each time, CA verified.

    Several scrapes land on several workers; each must show the sum over all of them.
    """
    pages = [requests.get(f"{base}/metrics", verify=str(ca), timeout=5) for _ in range(times)]
    for page in pages:
        assert page.status_code == 200
        assert page.headers["Content-Type"].startswith("text/plain")
    return pages[-1].text


def post_example(base: str, ca: Path, name: str, path: str) -> dict[str, Any]:
    body = (REPO / "examples" / "reviews" / name).read_bytes()
    answer = requests.post(base + path, data=body, verify=str(ca), timeout=10,
                           headers={"Content-Type": "application/json"})
    assert answer.status_code == 200, answer.text
    return answer.json()["response"]


def value(found: dict[str, list[tuple[dict[str, str], float]]], name: str,
          **labels: str) -> float:
    matches = [v for got, v in found.get(name, []) if all(got.get(k) == w
                                                          for k, w in labels.items())]
    assert len(matches) == 1, (name, labels, found.get(name))
    return matches[0]


def check_webhook_metrics(text: str, cert: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The page a user scrapes after one denied scale-down, one patched pod and one clamp."""
    assert text.strip(), "/metrics is empty"
    found = samples(text)
    assert value(found, "poolguard_admission_requests_total", endpoint="/validate-scale",
                 result="denied") == 1
    assert value(found, "poolguard_admission_requests_total", endpoint="/mutate-pods",
                 result="patched") == 1
    assert value(found, "poolguard_scale_violations_total", rule="protectedLast",
                 enforcement="enforce") == 1
    assert value(found, "poolguard_admission_duration_seconds_count",
                 endpoint="/validate-scale") == 1
    assert value(found, "poolguard_scale_clamped_total", kind="Deployment", namespace="ml") == 1
    assert value(found, "poolguard_cache_synced") == 1
    assert value(found, "poolguard_policy_reload_errors_total") == 0
    assert value(found, "poolguard_policy_loaded_timestamp_seconds") > time.time() - 600
    not_after = x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc
    assert value(found, "poolguard_serving_certificate_expiry_timestamp_seconds") == (
        not_after.timestamp())
    return found


def test_make_run_serves_the_metrics_the_rules_and_dashboard_use(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    base = f"https://localhost:{port}"
    with started(["make", "--no-print-directory", "run", f"PORT={port}"], tmp_path / "run.log",
                 env=env) as process:
        wait_for(f"{base}/healthz", process, tmp_path / "run.log", verify=str(CERTS / "ca.crt"))
        denied = post_example(base, CERTS / "ca.crt", "scale-deployment.json", "/validate-scale")
        assert denied["allowed"] is False
        patched = post_example(base, CERTS / "ca.crt", "pod-create.json", "/mutate-pods")
        assert patched["patchType"] == "JSONPatch"
        clamped = post_example(base, CERTS / "ca.crt", "scale-deployment-hpa.json",
                               "/mutate-scale")
        assert clamped["patchType"] == "JSONPatch"
        time.sleep(6)  # every worker has reported its cache state once (every 5 s)
        text = scrape_webhook(base, CERTS / "ca.crt")
    found = check_webhook_metrics(text, CERTS / "tls.crt")
    for source, names in used_metric_names().items():
        webhook_names = {n for n in names if not RECONCILER_METRICS.match(n)}
        assert webhook_names, source
        missing = webhook_names - set(found)
        assert not missing, f"{source} uses metrics the webhook does not serve: {missing}"


def _manifest_container(deployment: str) -> dict[str, Any]:
    result = subprocess.run([KUBECTL, "kustomize", REPO / "manifests" / "overlays" /
                             "self-signed"], capture_output=True, text=True, check=True)
    for obj in yaml.safe_load_all(result.stdout):
        if obj and obj["kind"] == "Deployment" and obj["metadata"]["name"] == deployment:
            return obj["spec"]["template"]["spec"]["containers"][0]
    raise AssertionError(deployment)


def _as_shipped(container: dict[str, Any], files: dict[str, str], port: str) -> list[str]:
    """The container's command line, its mounted files and its port moved to local ones."""
    args = [files.get(a, a) for a in container["args"]]
    for flag in ("--port", "--metrics-port"):
        if flag in args:
            args[args.index(flag) + 1] = port
    return [sys.executable, "-m", "webhook", *args]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeKubeAPI, Path]]:
    with FakeKubeAPI() as api:
        api.put(*items_of(yaml.safe_load_all((REPO / "examples" / "cluster-state.yaml")
                                             .read_text())))
        yield api, api.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (kubectl kustomize)")
def test_the_shipped_deployments_serve_the_metrics_the_rules_and_dashboard_use(
        tmp_path: Path, cluster: tuple[FakeKubeAPI, Path]) -> None:
    api, kubeconfig = cluster
    # A pod created while the webhook was away: the reconciler has a cost to write.
    api.modify("Pod", "ml", "llm-serve-7c9d8f6b5-h2w5d",
               lambda pod: pod["metadata"].pop("annotations", None))
    # A cost Karpenter owns (its managedFields say so): counted per writer, for the alert.
    api.modify("Pod", "ml", "llm-serve-7c9d8f6b5-k4z9s", lambda pod: pod["metadata"].update(
        managedFields=[{"manager": "karpenter", "operation": "Update",
                        "time": "2026-11-22T11:00:00Z", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:metadata": {"f:annotations": {
                            "f:controller.kubernetes.io/pod-deletion-cost": {}}}}}]))
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env["KUBECONFIG"] = str(kubeconfig)  # stands in for the in-cluster ServiceAccount
    make_certs = subprocess.run(["make", "--no-print-directory", "certs"], cwd=REPO,
                                capture_output=True, text=True, check=False)
    assert make_certs.returncode == 0, make_certs.stderr
    files = {"/etc/poolguard/policy.yaml": str(REPO / "manifests" / "base" / "policy.yaml"),
             "/etc/poolguard/tls/tls.crt": str(CERTS / "tls.crt"),
             "/etc/poolguard/tls/tls.key": str(CERTS / "tls.key")}
    webhook_port, reconciler_port = free_port(), free_port()
    webhook = _as_shipped(_manifest_container("poolguard-webhook"), files, str(webhook_port))
    reconciler_container = _manifest_container("poolguard-reconciler")
    reconciler = _as_shipped(reconciler_container, files, str(reconciler_port))
    # The downward API values the manifest gives the reconciler.
    assert {e["name"] for e in reconciler_container["env"]} == {"POD_NAME", "POD_NAMESPACE"}
    reconciler_env = {**env, "POD_NAME": "poolguard-reconciler-0", "POD_NAMESPACE": "poolguard"}
    base = f"https://localhost:{webhook_port}"
    with started(webhook, tmp_path / "webhook.log", env=env) as server, \
            started(reconciler, tmp_path / "reconciler.log", env=reconciler_env) as loop:
        wait_for(f"{base}/readyz", server, tmp_path / "webhook.log",
                 verify=str(CERTS / "ca.crt"))
        assert post_example(base, CERTS / "ca.crt", "scale-deployment.json",
                            "/validate-scale")["allowed"] is False
        assert post_example(base, CERTS / "ca.crt", "pod-create.json",
                            "/mutate-pods")["patchType"] == "JSONPatch"
        assert post_example(base, CERTS / "ca.crt", "scale-deployment-hpa.json",
                            "/mutate-scale")["patchType"] == "JSONPatch"
        time.sleep(6)
        webhook_text = scrape_webhook(base, CERTS / "ca.crt")
        metrics_url = f"http://127.0.0.1:{reconciler_port}"
        wait_for(f"{metrics_url}/healthz", loop, tmp_path / "reconciler.log")
        deadline = time.monotonic() + 30
        while True:  # the leader has been elected and has made its first pass
            page = requests.get(f"{metrics_url}/metrics", timeout=5)
            reconciler_found = samples(page.text)
            if (value(reconciler_found, "poolguard_reconciler_patches_total",
                      result="patched") >= 1 or time.monotonic() > deadline):
                break
            time.sleep(0.5)
    assert page.status_code == 200 and page.text.strip()
    assert value(reconciler_found, "poolguard_reconciler_leader") == 1
    assert value(reconciler_found, "poolguard_reconciler_patches_total", result="patched") >= 1
    assert value(reconciler_found, "poolguard_reconciler_patches_total", result="error") == 0
    assert value(reconciler_found, "poolguard_foreign_cost_pods", manager="karpenter") == 1
    assert api.write_count("PATCH", "/pods/") >= 1  # it really wrote costs
    webhook_found = check_webhook_metrics(webhook_text, CERTS / "tls.crt")
    served = set(webhook_found) | set(reconciler_found)
    for source, names in used_metric_names().items():
        missing = names - served
        assert not missing, f"{source} uses metrics nobody serves: {missing}"
    assert any(n.startswith("poolguard_reconciler_") for n in used_metric_names()[
        "prometheus-rules.yaml"])


def test_the_metric_name_check_is_not_vacuous() -> None:
    names = used_metric_names()
    assert "poolguard_serving_certificate_expiry_timestamp_seconds" in names[
        "prometheus-rules.yaml"]
    assert "poolguard_admission_duration_seconds_bucket" in names["grafana-dashboard.json"]
    assert len(names["prometheus-rules.yaml"]) >= 8
    assert samples("poolguard_x_total 1\n") == {"poolguard_x_total": [({}, 1.0)]}
