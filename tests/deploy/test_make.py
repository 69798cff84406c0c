"""mk/install.mk: the install targets as a person runs them."""

from __future__ import annotations

import base64
import re
import shlex
from pathlib import Path

import yaml

from certs import pki
from tests.deploy.test_manifests import _excludes
from tests.support.install import (
    INSTALL_MK,
    NAMESPACE,
    PY,
    SERVICE,
    SERVICE_NAMES,
    _bundles,
    find,
    needs_kubectl,
    run,
    webhooks,
)

# =========================================================================== mk/install.mk


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
    assert _bundles(objects).count(bundle) == 5
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


