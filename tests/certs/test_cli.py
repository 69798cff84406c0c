"""`python -m certs` as a person runs it: create, renew, ca-bundle, inject, help."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import socket
import ssl
from pathlib import Path

import kubernetes_validate.utils as kv
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from certs import pki
from certs.files import write_pair
from tests.support.install import (
    K8S_VERSIONS,
    NAMESPACE,
    SERVICE_NAMES,
    WEBHOOK_DOCS,
    _bundles,
    assert_one_line_error,
    cert_of,
    certs_cli,
    mode_of,
    snapshot,
    tls_handshake,
    write_dir,
)

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


def test_inject_with_a_file_that_is_no_certificate_says_what_it_holds(created: Path) -> None:
    readme = certs_cli("inject", "--ca-file", "README.md", stdin=WEBHOOK_DOCS)
    assert_one_line_error(readme, "--ca-file README.md: not a PEM certificate (no -----BEGIN")
    assert "cryptography.io" not in readme.stderr
    key = certs_cli("inject", "--ca-file", created / "tls.key", stdin=WEBHOOK_DOCS)
    assert_one_line_error(key, "not a PEM certificate (it holds a private key)")


def test_sync_against_an_unreachable_api_server_exits_2(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "c", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "c"}}]}))
    result = certs_cli("sync", "--namespace", NAMESPACE, "--service", "s", "--secret", "t",
                       "--kubeconfig", kubeconfig)
    assert_one_line_error(result, f"cannot reach the API server at http://127.0.0.1:{port}")
    assert "Traceback" not in result.stderr


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
