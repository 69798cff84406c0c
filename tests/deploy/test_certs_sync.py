"""`python -m certs sync`, run as the chart's hook Jobs run it, against the fake API server.

The webhook configurations are the chart's own rendering; the commands are the Jobs' own
arguments (pointed at the fake server with --kubeconfig). What a user sees is checked: the
Secrets, the caBundles, the printed lines, the exit codes and how many writes were made.
"""

from __future__ import annotations

import base64
import datetime as dt
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from certs import pki
from tests.support.chart import CHART, find, render
from tests.support.kubeapi.server import FakeKubeAPI

NAMESPACE, SERVICE, SECRET = "gpu-guard", "guard", "guard-tls"


def job_args(objects: list[dict[str, Any]], phase: str) -> list[str]:
    job = find(objects, "Job", f"poolguard-certs-{phase}")
    return job["spec"]["template"]["spec"]["containers"][0]["args"]


def certs(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "certs", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=60, check=False)


def secret_data(api: FakeKubeAPI, name: str) -> dict[str, bytes]:
    secret = api.get("Secret", NAMESPACE, name)
    assert secret is not None, name
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    objects = render(CHART / "ci" / "custom-values.yaml")
    with FakeKubeAPI() as api:
        api.put(*(o for o in objects if o["kind"].endswith("WebhookConfiguration")))
        yield api, api.write_kubeconfig(tmp_path / "kubeconfig"), objects


def test_install_makes_the_secrets_then_writes_the_ca_bundle(cluster: Any) -> None:
    api, kubeconfig, objects = cluster
    made = certs(kubeconfig, *job_args(objects, "secret"))
    assert made.returncode == 0, made.stderr
    assert f"CA Secret {NAMESPACE}/{SECRET}-ca: created" in made.stdout
    assert f"Secret {NAMESPACE}/{SECRET}: created (it does not exist) for guard.gpu-guard.svc" \
        in made.stdout

    ca = secret_data(api, f"{SECRET}-ca")
    serving = secret_data(api, SECRET)
    assert api.get("Secret", NAMESPACE, SECRET)["type"] == "kubernetes.io/tls"
    assert serving["ca.crt"] == ca["ca.crt"] and "ca.key" not in serving
    pki.verify_chain(serving["tls.crt"], ca["ca.crt"])
    assert pki.key_matches_cert(serving["tls.key"], serving["tls.crt"])
    assert pki.san_dns_names(serving["tls.crt"]) == pki.service_dns_names(SERVICE, NAMESPACE)
    life = (pki.load_certificate(serving["tls.crt"]).not_valid_after_utc
            - pki.load_certificate(serving["tls.crt"]).not_valid_before_utc)
    assert dt.timedelta(days=29) < life <= dt.timedelta(days=31)  # certificates.selfSigned.days

    injected = certs(kubeconfig, *job_args(objects, "ca-bundle"))
    assert injected.returncode == 0, injected.stderr
    assert "mutatingwebhookconfigurations/poolguard: caBundle written into 3 webhooks" \
        in injected.stdout
    bundle = base64.b64encode(ca["ca.crt"]).decode()
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        hooks = api.get(kind, "", "poolguard")["webhooks"]
        assert [h["clientConfig"]["caBundle"] for h in hooks] == [bundle] * len(hooks)
        assert all(h["clientConfig"]["service"]["name"] == SERVICE for h in hooks)


def test_upgrade_with_nothing_due_writes_nothing(cluster: Any) -> None:
    api, kubeconfig, objects = cluster
    for phase in ("secret", "ca-bundle"):
        assert certs(kubeconfig, *job_args(objects, phase)).returncode == 0
    before = secret_data(api, SECRET)
    api.reset_log()
    again = certs(kubeconfig, *job_args(objects, "secret"))
    bundle = certs(kubeconfig, *job_args(objects, "ca-bundle"))
    assert again.returncode == 0 and bundle.returncode == 0
    assert "no renewal needed" in again.stdout and "already current" in bundle.stdout
    assert api.write_count() == 0
    assert secret_data(api, SECRET) == before


def test_a_renamed_service_renews_the_certificate_keeping_ca_and_key(cluster: Any) -> None:
    api, kubeconfig, objects = cluster
    assert certs(kubeconfig, *job_args(objects, "secret")).returncode == 0
    before = secret_data(api, SECRET)
    args = job_args(objects, "secret")
    args[args.index("--service") + 1] = "guard2"
    renewed = certs(kubeconfig, *args)
    assert renewed.returncode == 0, renewed.stderr
    assert "renewed (the certificate does not name guard2.gpu-guard.svc" in renewed.stdout
    after = secret_data(api, SECRET)
    assert after["ca.crt"] == before["ca.crt"] and after["tls.key"] == before["tls.key"]
    assert pki.service_dns_names("guard2", NAMESPACE) == pki.san_dns_names(after["tls.crt"])


def test_a_broken_ca_secret_is_replaced_and_the_serving_cert_follows(cluster: Any) -> None:
    api, kubeconfig, objects = cluster
    assert certs(kubeconfig, *job_args(objects, "secret")).returncode == 0
    other_key, _ = pki.generate_ca()
    api.modify("Secret", NAMESPACE, f"{SECRET}-ca", lambda s: s["data"].update(
        {"ca.key": base64.b64encode(other_key).decode()}))
    fixed = certs(kubeconfig, *job_args(objects, "secret"))
    assert fixed.returncode == 0, fixed.stderr
    assert "the CA key does not match the CA certificate; making a new CA" in fixed.stdout
    ca, serving = secret_data(api, f"{SECRET}-ca"), secret_data(api, SECRET)
    pki.verify_chain(serving["tls.crt"], ca["ca.crt"])
    assert serving["ca.crt"] == ca["ca.crt"]


def test_errors_are_one_line_with_exit_codes(cluster: Any, tmp_path: Path) -> None:
    api, kubeconfig, objects = cluster
    early = certs(kubeconfig, *job_args(objects, "ca-bundle"))  # before the Secret exists
    assert early.returncode == 2
    assert early.stderr.strip() == (f"error: Secret {NAMESPACE}/{SECRET} has no ca.crt: run "
                                    "`python -m certs sync` without --ca-bundle-only first")
    api.fail(403)
    refused = certs(kubeconfig, *job_args(objects, "secret"))
    assert refused.returncode == 2
    line, = refused.stderr.strip().splitlines()
    assert line.startswith(f"error: Secret {NAMESPACE}/{SECRET}-ca: ") and "403" in line
    api.clear_faults()
    missing = certs(tmp_path / "nope", *job_args(objects, "secret"))
    assert missing.returncode == 2 and "no such file" in missing.stderr  # input error
    usage = certs(kubeconfig, "sync", "--namespace", NAMESPACE, "--service", SERVICE,
                  "--secret", SECRET, "--days", "0")
    assert usage.returncode == 2 and usage.stderr.startswith("error: ")
