"""The Helm chart charts/poolguard: lint, render, schema-validate, and match the kustomize base.

helm is built from the Go module proxy by `make helm` (mk/chart.mk; `make test` does it
first). Every values file in charts/poolguard/ci/ is a documented combination
(docs/install.md "Helm"): each one lints, renders and validates against the Kubernetes
schemas, strictly. With the default values the chart renders the same objects as
`kubectl kustomize manifests/overlays/self-signed`, so the two cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate.utils as kv
import pytest
import yaml

from certs.cli import build_parser as certs_parser
from tests.support.chart import (
    CHART,
    CI_VALUES,
    CRD_KINDS,
    K8S_VERSIONS,
    KUBECTL,
    RENEWAL,
    RENEWAL_OBJECTS,
    REPO,
    _normalize,
    find,
    helm,
    is_chart_only,
    is_hook,
    kinds,
    kustomized,
    render,
)

# --------------------------------------------------------------------------- lint, schemas


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda v: v.stem if v else "default")
def test_helm_lint_strict(values: Path | None) -> None:
    args: list[str | Path] = ["lint", "--strict", CHART]
    if values:
        args += ["--values", values]
    result = helm(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda v: v.stem if v else "default")
def test_rendered_objects_validate_against_kubernetes_schemas(values: Path | None,
                                                              version: str) -> None:
    objects = render(*([values] if values else []))
    checked = 0
    for obj in objects:
        if obj["kind"] in CRD_KINDS:
            continue  # custom resources: checked field by field in the tests below
        kv.validate(obj, version, strict=True)  # raises on any error or unknown field
        checked += 1
    assert checked >= 16, checked  # the smallest combination (webhook-only) has 16


def test_every_values_combination_is_documented() -> None:
    install_doc = (REPO / "docs" / "install.md").read_text()
    for path in CI_VALUES:
        assert f"charts/poolguard/ci/{path.name}" in install_doc, path.name


# --------------------------------------------------------------------------- same as kustomize


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (kubectl kustomize)")
@pytest.mark.parametrize(("overlay", "values"), [
    ("self-signed", []), ("cert-manager", [CHART / "ci" / "cert-manager-values.yaml"])])
def test_default_chart_renders_the_kustomize_objects(overlay: str, values: list[Path]) -> None:
    chart = {(o["kind"], o["metadata"]["name"]): _normalize(o)
             for o in render(*values, sets=("createNamespace=true",))
             if not is_chart_only(o) or o["kind"] == "Namespace"}
    base = {(o["kind"], o["metadata"]["name"]): _normalize(o) for o in kustomized(overlay)}
    namespace = chart[("Namespace", "poolguard")]
    for key in [k for k in namespace["metadata"]["annotations"] if k.startswith("helm.sh/")]:
        del namespace["metadata"]["annotations"][key]  # the chart makes it before its hook Job
    assert sorted(chart) == sorted(base)
    for key, obj in base.items():
        assert chart[key] == obj, key


def test_chart_only_objects_are_the_certificate_hook() -> None:
    hooks = [o for o in render() if is_hook(o)]
    assert kinds(hooks) == {("ServiceAccount", "poolguard-certs"), ("Role", "poolguard-certs"),
                            ("RoleBinding", "poolguard-certs"),
                            ("ClusterRole", "poolguard-certs"),
                            ("ClusterRoleBinding", "poolguard-certs"),
                            ("Job", "poolguard-certs-secret"),
                            ("Job", "poolguard-certs-ca-bundle")}
    phases = {o["metadata"]["name"]: o["metadata"]["annotations"]["helm.sh/hook"]
              for o in hooks if o["kind"] == "Job"}
    # The Secret exists before the webhook Pods that mount it; the caBundle is written once
    # the webhook configurations exist.
    assert phases == {"poolguard-certs-secret": "pre-install,pre-upgrade",
                      "poolguard-certs-ca-bundle": "post-install,post-upgrade"}
    assert not [o for o in render(CHART / "ci" / "cert-manager-values.yaml") if is_hook(o)]


def test_chart_only_objects_besides_the_hook_are_the_renewal_cronjob() -> None:
    """What the equality test with kustomize leaves out, and only with self-signed
    certificates and renewal on (the default)."""
    assert kinds([o for o in render() if is_chart_only(o) and not is_hook(o)]) == RENEWAL_OBJECTS
    for off in (render(CHART / "ci" / "cert-manager-values.yaml"),
                render(sets=("certificates.selfSigned.renewal.enabled=false",))):
        assert not {(o["kind"], o["metadata"]["name"]) for o in off} & RENEWAL_OBJECTS


def test_renewal_cronjob_runs_the_hook_command_with_only_the_rights_it_needs() -> None:
    """The CronJob runs the pre-install hook's `certs sync` (same names and lifetimes), plus
    the caBundle write; its ServiceAccount can read and update the two Secrets and patch the
    two webhook configurations, nothing else (no create, no other Secret)."""
    objects = render(CHART / "ci" / "custom-values.yaml")
    cronjob = find(objects, "CronJob", RENEWAL)
    assert cronjob["spec"]["schedule"] == "0 */6 * * *"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == RENEWAL
    main = pod["containers"][0]
    hook = find(objects, "Job", "poolguard-certs-secret")["spec"]["template"]["spec"]
    assert main["command"] == hook["containers"][0]["command"] == ["python", "-m", "certs"]
    assert main["args"] == [*hook["containers"][0]["args"], "--webhook-configuration",
                            "poolguard"]
    assert main["image"] == hook["containers"][0]["image"]
    assert main["securityContext"] == hook["containers"][0]["securityContext"]
    args = certs_parser().parse_args(main["args"])
    assert (args.namespace, args.service, args.secret, args.days, args.ca_bundle_only) == (
        "gpu-guard", "guard", "guard-tls", 30, False)

    role = find(objects, "Role", RENEWAL)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                              "resourceNames": ["guard-tls", "guard-tls-ca"],
                              "verbs": ["get", "update"]}]
    cluster_role = find(objects, "ClusterRole", RENEWAL)
    assert cluster_role["rules"] == [{
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        "resourceNames": ["poolguard"], "verbs": ["get", "patch"]}]
    for kind, ref in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        binding = find(objects, kind, RENEWAL)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": ref,
                                      "name": RENEWAL}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RENEWAL,
                                        "namespace": "gpu-guard"}]
    # not a hook: it stays for the release's life
    assert not [o for o in objects if is_hook(o) and o["metadata"]["name"] == RENEWAL]


def test_values_policy_is_the_example_policy() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    example = yaml.safe_load((REPO / "examples" / "policy.yaml").read_text())
    assert values["policy"] == example
