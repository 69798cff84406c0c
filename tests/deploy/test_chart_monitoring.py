"""The chart's metrics Services, ServiceMonitors, alert rules and dashboard, and the
clamp's users and alert delay.
"""

from __future__ import annotations

import json

import pytest
import yaml

from certs import pki
from tests.support.chart import (
    CHART,
    REPO,
    find,
    kinds,
    render,
)


def test_metrics_services_select_the_pods_and_their_named_ports() -> None:
    objects = render()
    for component, port, target in (("webhook", 8443, "https"), ("reconciler", 9090, "metrics")):
        service = find(objects, "Service", f"poolguard-{component}-metrics")
        assert service["metadata"]["labels"]["poolguard.dev/metrics"] == "true"
        assert service["spec"]["ports"] == [{"name": "metrics", "port": port,
                                             "targetPort": target, "protocol": "TCP"}]
        template = find(objects, "Deployment", f"poolguard-{component}")["spec"]["template"]
        labels = template["metadata"]["labels"]
        assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
        ports = {p["name"]: p["containerPort"] for p in template["spec"]["containers"][0]["ports"]}
        assert ports[target] == port
    assert not {("Service", "poolguard-webhook-metrics")} & kinds(
        render(CHART / "ci" / "webhook-only-values.yaml"))


def test_service_monitors_scrape_what_the_services_serve() -> None:
    objects = render(CHART / "ci" / "monitoring-values.yaml")
    webhook = find(objects, "ServiceMonitor", "poolguard-webhook")
    assert webhook["apiVersion"] == "monitoring.coreos.com/v1"
    assert webhook["metadata"]["labels"]["release"] == "prometheus"
    service = find(objects, "Service", "poolguard-webhook-metrics")
    assert all(service["metadata"]["labels"][k] == v
               for k, v in webhook["spec"]["selector"]["matchLabels"].items())
    (endpoint,) = webhook["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"], endpoint["path"]) == ("metrics", "https",
                                                                        "/metrics")
    # The certificate the hook Job makes names the Service: the scrape verifies against it.
    assert endpoint["tlsConfig"]["serverName"] in pki.service_dns_names("poolguard-webhook",
                                                                        "poolguard")
    assert endpoint["tlsConfig"]["ca"]["secret"] == {"name": "poolguard-webhook-tls",
                                                     "key": "ca.crt"}
    assert endpoint["scrapeTimeout"] == "10s"
    assert endpoint["metricRelabelings"][0]["regex"] == "python_gc_.*"
    reconciler = find(objects, "ServiceMonitor", "poolguard-reconciler")
    assert reconciler["spec"]["endpoints"][0]["scheme"] == "http"
    elsewhere = render(CHART / "ci" / "monitoring-values.yaml",
                       sets=("metrics.serviceMonitor.namespace=monitoring",))
    assert {o["metadata"]["namespace"] for o in elsewhere if o["kind"] == "ServiceMonitor"} == {
        "monitoring"}
    assert all(find(objects, "Service", "poolguard-reconciler-metrics")["metadata"]["labels"][k]
               == v for k, v in reconciler["spec"]["selector"]["matchLabels"].items())


def test_prometheus_rule_and_dashboard_are_the_shipped_files() -> None:
    objects = render(CHART / "ci" / "monitoring-values.yaml")
    rule = find(objects, "PrometheusRule", "poolguard")
    shipped = yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())
    assert rule["spec"] == shipped
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    assert all(r["labels"]["severity"] in ("warning", "critical") for r in alerts)
    doc = (REPO / "docs" / "install.md").read_text().lower()
    for alert in alerts:  # each alert has its runbook section
        assert alert["annotations"]["runbook"] == f"docs/install.md#{alert['alert'].lower()}"
        assert f"#### {alert['alert'].lower()}" in doc, alert["alert"]
    dashboard = find(objects, "ConfigMap", "poolguard-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["poolguard.json"]) == json.loads(
        (CHART / "files" / "grafana-dashboard.json").read_text())


def test_clamp_alert_delay_and_autoscaler_users_follow_the_values() -> None:
    objects = render(CHART / "ci" / "monitoring-values.yaml", sets=(
        "metrics.prometheusRule.clampedFor=2h",
        "policy.scaleDown.autoscalers.users={my-scaler,system:serviceaccount:keda:keda-operator}",
        "webhooks.clamp.timeoutSeconds=2"))
    rules = find(objects, "PrometheusRule", "poolguard")["spec"]["groups"]
    [clamped] = [r for g in rules for r in g["rules"] if r.get("alert") == "PoolguardScaleClamped"]
    assert clamped["for"] == "2h"
    hooks = {h["name"]: h for h in find(objects, "MutatingWebhookConfiguration",
                                         "poolguard")["webhooks"]}
    clamp = hooks["clamp.poolguard.dev"]
    assert clamp["timeoutSeconds"] == 2 and clamp["clientConfig"]["service"]["path"] == (
        "/mutate-scale")
    users = next(c["expression"] for c in clamp["matchConditions"]
                 if c["name"] == "clamped-users")
    assert " ".join(users.split()) == ("request.userInfo.username in ['my-scaler', "
                                      "'system:serviceaccount:keda:keda-operator']")


@pytest.mark.parametrize(("enforcement", "called"), [("warn", False), ("clamp", True)])
def test_the_clamp_is_called_for_git_ops_controllers_only_under_clamp(
        enforcement: str, called: bool) -> None:
    """A GitOps controller under warn is answered by the scale check alone: the clamp
    webhook is not even called for it."""
    argocd = "system:serviceaccount:argocd:argocd-application-controller"
    objects = render(sets=(f"policy.scaleDown.gitOps.users={{{argocd}}}",
                           f"policy.scaleDown.gitOps.enforcement={enforcement}"))
    hooks = {h["name"]: h for h in find(objects, "MutatingWebhookConfiguration",
                                         "poolguard")["webhooks"]}
    users = next(c["expression"] for c in hooks["clamp.poolguard.dev"]["matchConditions"]
                 if c["name"] == "clamped-users")
    assert ("system:serviceaccount:kube-system:horizontal-pod-autoscaler" in users
            and (f"'{argocd}'" in users) is called)
    policy = yaml.safe_load(find(objects, "ConfigMap", "poolguard-policy")["data"]["policy.yaml"])
    assert policy["scaleDown"]["gitOps"] == {"users": [argocd], "enforcement": enforcement}
