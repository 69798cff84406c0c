"""The chart's network policies, certificates (cert-manager and the hook Job) and the
absence of secret material in what it renders.
"""

from __future__ import annotations

import base64

from certs import pki
from certs.cli import build_parser as certs_parser
from tests.support.chart import (
    CHART,
    CI_VALUES,
    _template,
    find,
    render,
)


def test_network_policies_open_only_the_serving_ports() -> None:
    objects = render(CHART / "ci" / "network-policy-values.yaml")
    webhook = find(objects, "NetworkPolicy", "poolguard-webhook")
    assert webhook["spec"]["ingress"] == [{"ports": [{"port": 8443, "protocol": "TCP"}]}]
    reconciler = find(objects, "NetworkPolicy", "poolguard-reconciler")
    (rule,) = reconciler["spec"]["ingress"]
    assert rule["ports"] == [{"port": 9090, "protocol": "TCP"}]
    assert rule["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"}
    # on by default, as in manifests/base; off only when asked
    assert "NetworkPolicy" in {o["kind"] for o in render()}
    assert "NetworkPolicy" not in {o["kind"] for o in render(sets=("networkPolicy.enabled=false",))}


def test_cert_manager_values_make_the_certificates_for_the_service() -> None:
    objects = render(CHART / "ci" / "cert-manager-values.yaml",
                     sets=("webhook.serviceName=guard",), namespace="team-a")
    certificate = find(objects, "Certificate", "poolguard-webhook")
    assert certificate["spec"]["dnsNames"] == pki.service_dns_names("guard", "team-a")
    assert certificate["spec"]["secretName"] == "poolguard-webhook-tls"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = find(objects, kind, "poolguard")
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
            "team-a/poolguard-webhook")
        assert all("caBundle" not in h["clientConfig"] for h in config["webhooks"])


def test_certificate_hook_jobs_run_a_valid_certs_command() -> None:
    """The Jobs' arguments parse with the certs tool's own parser, for the chart's names."""
    objects = render(CHART / "ci" / "custom-values.yaml")
    parser = certs_parser()
    for phase in ("secret", "ca-bundle"):
        job = find(objects, "Job", f"poolguard-certs-{phase}")
        main = job["spec"]["template"]["spec"]["containers"][0]
        assert main["command"] == ["python", "-m", "certs"]
        args = parser.parse_args(main["args"])
        assert (args.namespace, args.service, args.secret, args.days) == (
            "gpu-guard", "guard", "guard-tls", 30)
        assert args.ca_bundle_only == (phase == "ca-bundle")
    role = find(objects, "Role", "poolguard-certs")
    names = {n for rule in role["rules"] for n in rule.get("resourceNames", [])}
    assert names == {"guard-tls", "guard-tls-ca"}


def test_no_secret_material_is_rendered() -> None:
    for values in [None, *CI_VALUES]:
        text = _template((str(values),) if values else (), (), "poolguard")
        assert "PRIVATE KEY" not in text
        assert "kind: Secret" not in text
        assert base64.b64encode(b"-----BEGIN").decode()[:8] not in text
