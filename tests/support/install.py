"""Helpers for the install tests: running the CLIs, rendering the overlays, reading certs."""

from __future__ import annotations

import os
import shutil
import ssl
import stat
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate.utils as kv
import pytest
import yaml
from cryptography import x509

from certs.files import write_pair

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
KUBECTL = shutil.which("kubectl")
HADOLINT = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
    "hadolint")
OVERLAYS = ("self-signed", "cert-manager")
# 1.30: matchConditions are GA (the oldest release poolguard supports); and the newest
# schemas kubernetes-validate bundles.
K8S_VERSIONS = ("1.30.0", kv.latest_version())
CERT_MANAGER_KINDS = {"Issuer", "Certificate"}
SERVICE, NAMESPACE = "poolguard-webhook", "poolguard"
SERVICE_NAMES = [f"{SERVICE}.{NAMESPACE}.svc", f"{SERVICE}.{NAMESPACE}.svc.cluster.local"]
DEPLOYMENT_CONTROLLER = "system:serviceaccount:kube-system:deployment-controller"

needs_kubectl = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed, so `kubectl kustomize` cannot render "
    "the overlays (CI has kubectl)")


# --------------------------------------------------------------------------- helpers


def run(*args: str | os.PathLike, stdin: str | None = None, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], input=stdin, capture_output=True, text=True,
                          cwd=cwd or REPO, env=env, timeout=120, check=False)


def certs_cli(*args: str | os.PathLike, stdin: str | None = None
              ) -> subprocess.CompletedProcess[str]:
    return run(PY, "-m", "certs", *args, stdin=stdin)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@cache
def _render(overlay: str) -> str:
    result = run(KUBECTL, "kustomize", REPO / "manifests" / "overlays" / overlay)
    assert result.returncode == 0, result.stderr
    return result.stdout


def rendered(overlay: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(_render(overlay)) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def webhooks(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in find(objects, kind, "poolguard")["webhooks"]}


def pod_spec(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return find(objects, "Deployment", name)["spec"]["template"]["spec"]


def cert_of(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def tls_handshake(cert: Path, key: Path, ca: Path, server_hostname: str) -> dict[str, Any]:
    """A real TLS handshake in memory: a server with cert+key, a client trusting only ca."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=str(ca))
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=server_hostname)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, end in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            break
    assert all(done.values()), done
    return client.getpeercert()


def write_dir(directory: Path, ca: tuple[bytes, bytes], leaf: tuple[bytes, bytes]) -> None:
    """Lay out an --out-dir as `create` does, from library-made PEMs."""
    directory.mkdir(parents=True, exist_ok=True)
    write_pair(directory / "ca.key", ca[0], directory / "ca.crt", ca[1])
    write_pair(directory / "tls.key", leaf[0], directory / "tls.crt", leaf[1])


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


INSTALL_MK = REPO / "mk" / "install.mk"

WEBHOOK_DOCS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: keep-me}
data: {a: "1"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: m}
webhooks:
  - name: a.example.dev
    clientConfig: {service: {name: s, namespace: n, path: /a}, caBundle: ""}
  - name: b.example.dev
    clientConfig: {service: {name: s, namespace: n, path: /b}}
---
apiVersion: v1
kind: List
items:
  - apiVersion: admissionregistration.k8s.io/v1
    kind: ValidatingWebhookConfiguration
    metadata: {name: v}
    webhooks:
      - name: c.example.dev
        clientConfig: {url: "https://example.test/c"}
"""


def _bundles(docs: list[Any]) -> list[str]:
    found = []
    for doc in docs:
        for config in doc.get("items", [doc]):
            for hook in config.get("webhooks", []):
                found.append(hook["clientConfig"].get("caBundle"))
    return found
