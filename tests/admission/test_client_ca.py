"""`serve --client-ca`: the admission endpoints answer only the API server's certificate."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.pki import generate_ca
from tests.support import factories as f
from tests.support import reviews
from tests.support.serving import ROOT, make_certs, running_server
from webhook.cluster.state import EXAMPLE_STATE


def client_certificate(ca_key_pem: bytes, ca_cert_pem: bytes, directory: Path) -> Path:
    """A clientAuth certificate for `kube-apiserver` signed by the CA; returns the PEM file
    holding the certificate and its key."""
    ca_key = serialization.load_pem_private_key(ca_key_pem, None)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    path = directory / "client.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return path


def post(url: str, ca: Path, path: str, body: bytes | None, client_pem: Path | None) -> int:
    context = ssl.create_default_context(cafile=str(ca))
    if client_pem:
        context.load_cert_chain(str(client_pem))
    host, port = url.removeprefix("https://").split(":")
    conn = http.client.HTTPSConnection(host, int(port), timeout=10, context=context)
    try:
        conn.request("POST" if body else "GET", path, body=body,
                     headers={"Content-Type": "application/json"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_admission_needs_a_client_certificate_from_the_ca_probes_do_not(tmp_path: Path) -> None:
    ca_key, ca_cert = generate_ca("apiserver-client-ca")
    (tmp_path / "client-ca.crt").write_bytes(ca_cert)
    trusted = client_certificate(ca_key, ca_cert, tmp_path)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    stranger = client_certificate(*generate_ca("someone-else"), other_dir)
    body = json.dumps(reviews.pod_create(f.pod("p", node_name="gpu-hyb-1"))).encode()
    with running_server(tmp_path / "server", "--state", str(EXAMPLE_STATE), "--client-ca",
                        str(tmp_path / "client-ca.crt")) as (url, ca, _):
        assert post(url, ca, "/mutate-pods", body, trusted) == 200
        assert post(url, ca, "/mutate-pods", body, None) == 403
        for path in ("/healthz", "/readyz", "/metrics"):
            assert post(url, ca, path, None, None) == 200, path
        with pytest.raises((ssl.SSLError, ConnectionResetError, socket.error)):
            post(url, ca, "/mutate-pods", body, stranger)


def test_client_ca_is_refused_with_other_workers_and_must_exist(tmp_path: Path) -> None:
    tls = make_certs(tmp_path)

    def serve(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "webhook", "serve", "--cert",
                               str(tls["cert"]), "--key", str(tls["key"]), *extra], cwd=ROOT,
                              capture_output=True, text=True, timeout=30)

    missing = serve("--client-ca", str(tmp_path / "nope.crt"))
    assert missing.returncode == 2
    assert f"--client-ca {tmp_path / 'nope.crt'}: no such file" in missing.stderr
    gthread = serve("--client-ca", str(tls["ca"]), "--worker-class", "gthread")
    assert gthread.returncode == 2 and "--client-ca needs the gevent worker" in gthread.stderr
