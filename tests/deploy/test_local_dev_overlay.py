"""manifests/overlays/local-dev: everything the base ships except the workloads, with the
webhooks called at https://127.0.0.1:8443 (what `make e2e` installs, on its own port)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.install import KUBECTL, REPO, needs_kubectl, rendered, webhooks
from tests.support.serving import make_certs
from webhook.cluster.kubeclient import api_client_from

OVERLAY = REPO / "manifests" / "overlays" / "local-dev" / "kustomization.yaml"

WORKLOADS = {("Deployment", "poolguard-webhook"), ("Deployment", "poolguard-reconciler"),
             ("Service", "poolguard-webhook"), ("Service", "poolguard-webhook-metrics"),
             ("Service", "poolguard-reconciler-metrics"),
             ("PodDisruptionBudget", "poolguard-webhook")}
CONFIGURATIONS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def _names(objects: list[dict]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}


@needs_kubectl
def test_local_dev_ships_the_base_without_the_workloads() -> None:
    base, local = rendered("self-signed"), rendered("local-dev")
    assert _names(local) == _names(base) - WORKLOADS
    # RBAC, ServiceAccounts, the policy and the namespace are the base's, unchanged
    for obj in local:
        if obj["kind"] not in CONFIGURATIONS:
            [same] = [o for o in base if (o["kind"], o["metadata"]["name"])
                      == (obj["kind"], obj["metadata"]["name"])]
            assert obj == same


@needs_kubectl
@pytest.mark.parametrize("kind", CONFIGURATIONS)
def test_local_dev_webhooks_call_localhost_on_the_base_paths(kind: str) -> None:
    base = webhooks(rendered("self-signed"), kind)
    local = webhooks(rendered("local-dev"), kind)
    assert set(local) == set(base)
    for name, hook in local.items():
        path = base[name]["clientConfig"]["service"]["path"]
        assert hook["clientConfig"] == {"url": f"https://127.0.0.1:8443{path}",
                                        "caBundle": ""}, name
        # everything else as shipped: rules, selectors, matchConditions, policies
        strip = {k: v for k, v in hook.items() if k != "clientConfig"}
        assert strip == {k: v for k, v in base[name].items() if k != "clientConfig"}


@needs_kubectl
def test_the_header_recipe_makes_a_kubeconfig_per_service_account(tmp_path: Path) -> None:
    """The header's kubeconfig lines, run with kubectl (only `create token` stubbed, as
    it needs a live API server), give each process a kubeconfig poolguard loads."""
    header = [line[4:] for line in OVERLAY.read_text().splitlines() if line.startswith("#   ")]
    start = next(i for i, line in enumerate(header) if line.startswith("server=$("))
    end = next(i for i, line in enumerate(header) if line.startswith("done"))
    recipe = "\n".join(header[start:end + 1])
    tls = make_certs(tmp_path / "api")
    (tmp_path / ".certs").mkdir()
    admin = tmp_path / "admin.kubeconfig"
    admin.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "admin",
        "clusters": [{"name": "c", "cluster": {
            "server": "https://127.0.0.1:6443",
            "certificate-authority-data": base64.b64encode(tls["ca"].read_bytes()).decode()}}],
        "users": [{"name": "admin", "user": {"token": "ADMIN-SECRET"}}],
        "contexts": [{"name": "admin", "context": {"cluster": "c", "user": "admin"}}]}))
    fakes = tmp_path / "bin"
    fakes.mkdir()
    stub = fakes / "kubectl"
    stub.write_text(f"""#!/bin/bash
case " $* " in *" create token "*) echo "token-for-${{@: -3:1}}"; exit 0 ;; esac
exec {KUBECTL} "$@"
""")
    stub.chmod(0o755)
    env = {**os.environ, "KUBECONFIG": str(admin), "PATH": f"{fakes}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", recipe], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    for sa in ("poolguard-webhook", "poolguard-reconciler"):
        kubeconfig = tmp_path / f"{sa}.kubeconfig"
        assert "ADMIN-SECRET" not in kubeconfig.read_text()
        api = api_client_from(str(kubeconfig))
        try:
            assert api.configuration.host == "https://127.0.0.1:6443"
            assert api.configuration.api_key["BearerToken"] == f"Bearer token-for-{sa}"
            assert Path(api.configuration.ssl_ca_cert).read_bytes() == tls["ca"].read_bytes()
        finally:
            api.close()
