"""The chart's values: renames, sizes, the policy, the schema's refusals, scheduling.

helm as in test_chart.py (tests/support/chart.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs.cli import build_parser as certs_parser
from tests.support.chart import (
    CHART,
    CI_VALUES,
    HELM,
    find,
    helm,
    render,
)
from webhook.cluster.state import load_policy

# --------------------------------------------------------------------------- values


def test_custom_values_rename_resize_and_reach_every_reference() -> None:
    objects = render(CHART / "ci" / "custom-values.yaml")
    namespaced = [o for o in objects if "namespace" in o["metadata"]]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"gpu-guard"}
    namespace = find(objects, "Namespace", "gpu-guard")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    service = find(objects, "Service", "guard")
    assert service["spec"]["ports"][0]["port"] == 443

    hooks = {h["name"]: h for kind in ("MutatingWebhookConfiguration",
                                       "ValidatingWebhookConfiguration")
             for h in find(objects, kind, "poolguard")["webhooks"]}
    for hook in hooks.values():
        assert hook["clientConfig"]["service"]["name"] == "guard"
        assert hook["clientConfig"]["service"]["namespace"] == "gpu-guard"
        excluded = hook["namespaceSelector"]["matchExpressions"][0]
        assert excluded == {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                            "values": ["kube-system", "gpu-guard"]}
    assert (hooks["scale.poolguard.dev"]["failurePolicy"],
            hooks["scale.poolguard.dev"]["timeoutSeconds"]) == ("Fail", 10)
    assert hooks["pods.poolguard.dev"]["timeoutSeconds"] == 2
    assert hooks["bindings.poolguard.dev"]["failurePolicy"] == "Ignore"

    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for binding in (o for o in objects if o["kind"] == kind):
            assert {s["namespace"] for s in binding["subjects"]} == {"gpu-guard"}

    webhook = find(objects, "Deployment", "poolguard-webhook")
    assert webhook["spec"]["replicas"] == 3
    assert find(objects, "Deployment", "poolguard-reconciler")["spec"]["replicas"] == 1
    pod = webhook["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
    main = pod["containers"][0]
    assert main["image"] == "registry.example.com/platform/poolguard:0.1.0-rc1"
    assert main["imagePullPolicy"] == "Always"
    assert main["resources"] == {"requests": {"cpu": "200m", "memory": "256Mi"},
                                 "limits": {"memory": "1Gi"}}
    assert main["args"][-1] == "--fail-closed"
    secret = next(s["secret"] for s in pod["volumes"][0]["projected"]["sources"] if "secret" in s)
    assert secret["name"] == "guard-tls"

    policy = yaml.safe_load(find(objects, "ConfigMap", "poolguard-policy")["data"]["policy.yaml"])
    assert policy["poolLabel"] == "example.com/pool"
    assert policy["scaleDown"]["enforcement"] == "warn"
    assert policy["scaleDown"]["minProtectedReplicas"] == "50%"


def test_the_policy_in_the_configmap_loads_in_poolguard(tmp_path: Path) -> None:
    """What the chart renders is a policy the server accepts (the server's own loader)."""
    for values in ([], [CHART / "ci" / "custom-values.yaml"],
                   [CHART / "ci" / "dryrun-values.yaml"]):
        text = find(render(*values), "ConfigMap", "poolguard-policy")["data"]["policy.yaml"]
        path = tmp_path / "policy.yaml"
        path.write_text(text)
        load_policy(str(path))


def test_enforcement_value_overrides_the_policy() -> None:
    for enforcement in ("dryrun", "warn", "enforce"):
        objects = render(sets=(f"enforcement={enforcement}",))
        configmap = find(objects, "ConfigMap", "poolguard-policy")
        policy = yaml.safe_load(configmap["data"]["policy.yaml"])
        assert policy["scaleDown"]["enforcement"] == enforcement
        assert policy["scaleDown"]["protectedLast"] is True  # the rest of the policy stays


@pytest.mark.parametrize(("assignment", "message"), [
    ("enforcement=audit", 'enforcement: "audit" is not one of dryrun, warn, enforce'),
    ("webhooks.scale.failurePolicy=Deny",
     'webhooks.scale.failurePolicy: "Deny" is not one of Ignore, Fail'),
    ("webhooks.pods.timeoutSeconds=31", "webhooks.pods.timeoutSeconds: 31 is outside 1-30"),
    ("certificates.source=vault", 'certificates.source: "vault" is not one of'),
    ("metrics.service.enabled=false,metrics.serviceMonitor.enabled=true",
     "metrics.serviceMonitor.enabled needs metrics.service.enabled"),
    ("metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true",
     "metrics.serviceMonitor.enabled and metrics.podMonitor.enabled: choose one"),
    ("webhook.podDisruptionBudget.minAvailable=null",
     "webhook.podDisruptionBudget: set minAvailable or maxUnavailable"),
])
def test_bad_values_stop_rendering_naming_the_value(assignment: str, message: str) -> None:
    result = helm("template", "poolguard", CHART, "--set", assignment)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(("assignment", "key"), [
    ("webhook.replicas=two", "/webhook/replicas"),
    ("webhook.hostNetwork=yes", "/webhook/hostNetwork"),
    ("webhook.port=0", "/webhook/port"),
    ("webhook.nodeSelector=linux", "/webhook/nodeSelector"),
    ("reconciler.tolerations.key=gpu", "/reconciler/tolerations"),
    ("reconciler.podDisruptionBudget.maxUnavailable=true",
     "/reconciler/podDisruptionBudget/maxUnavailable"),
    ("webhook.podDisruptionBudget.unhealthyPodEvictionPolicy=Never",
     "/webhook/podDisruptionBudget/unhealthyPodEvictionPolicy"),
    ("image.digest=latest", "/image/digest"),
    ("webhooks.pods.timeoutSeconds=three", "/webhooks/pods/timeoutSeconds"),
    ("webhooks.scale.matchConditions=none", "/webhooks/scale/matchConditions"),
    ("metrics.podMonitor.relabelings=drop", "/metrics/podMonitor/relabelings"),
    ("webhook.replica=3", "'replica'"),  # a misspelt key is unknown, not ignored
    ("scaleCheck.kinds.rollouts=maybe", "/scaleCheck/kinds/rollouts"),
    ("scaleCheck.kinds.deployments=false", "'deployments'"),  # the apps kinds are not optional
    # The policy's schema, generated from the policy model: what serve refuses at start.
    ("policy.pools[0].deletionCost=-5000", "/policy/pools/0"),  # a pool with no name
    ("policy.pools[1].name=Hybrid Pool", "/policy/pools/1"),
    ("policy.scaleDown.enforcement=audit", "/policy/scaleDown/enforcement"),
    ("policy.defaultDeletionCost=3000000000", "/policy/defaultDeletionCost"),
    ("policy.poolLable=gpu", "'poolLable'"),
])
def test_values_schema_refuses_a_wrong_type_naming_the_key(assignment: str, key: str) -> None:
    """values.schema.json: `helm template` (and so `helm install`, which runs the same
    check) and `helm lint` refuse the value before rendering, naming its key."""
    for command in ("template", "lint"):
        result = helm(command, *(["poolguard"] if command == "template" else []), CHART,
                      "--set", assignment)
        assert result.returncode != 0, result.stdout
        output = result.stdout + result.stderr
        assert "values don't meet the specifications of the schema" in output, output
        assert key in output, output


@pytest.mark.parametrize("policy", [
    {"pools": [{"name": "a", "deletionCost": 1, "protected": True},
               {"name": "a", "deletionCost": 0}]},
    {"pools": [{"name": "inference", "deletionCost": -5000, "protected": True},
               {"name": "hybrid", "deletionCost": -100}]},
    {"pools": [{"name": "inference", "deletionCost": 10, "protected": True}],
     "defaultDeletionCost": 20},
    {"pools": [{"name": "a", "deletionCost": 1}],
     "scaleDown": {"exemptUsers": ["ci", "hpa"], "autoscalers": {"users": ["hpa"]}}},
    {"pools": [{"name": "a", "deletionCost": 1}],
     "scaleDown": {"exemptUsers": ["ci", "argocd"], "gitOps": {"users": ["argocd"]}}},
    {"pools": [{"name": "a", "deletionCost": 1}],
     "scaleDown": {"autoscalers": {"users": ["hpa"]}, "gitOps": {"users": ["x", "hpa"]}}},
], ids=["duplicate-pool", "protected-cheaper-than-a-pool", "protected-cheaper-than-default",
        "exempt-autoscaler", "exempt-gitops", "autoscaler-gitops"])
def test_policy_rules_across_fields_stop_rendering_as_serve_stops_starting(
        tmp_path: Path, policy: dict[str, Any]) -> None:
    """What JSON Schema cannot say, the chart checks: the same policies that serve and
    `policy check` refuse, with the same field named."""
    from webhook.core.policy.policy import parse_policy
    from webhook.core.policy.policy_field import PolicyError
    with pytest.raises(PolicyError) as refused:
        parse_policy(policy, source="policy")
    field = str(refused.value).split(": ")[1]
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"policy": policy}))
    result = helm("template", "poolguard", CHART, "--values", values)
    assert result.returncode != 0
    assert f"policy.{field}: " in result.stderr, (field, result.stderr)
    assert "values don't meet the specifications of the schema" not in result.stderr


def test_values_schema_accepts_every_documented_combination() -> None:
    """The schema is no stricter than the values the chart documents (a --set of each
    settable type passes too)."""
    for values in CI_VALUES:
        assert helm("template", "poolguard", CHART, "--values", values).returncode == 0
    result = helm("template", "poolguard", CHART, "--set",
                  "webhook.podDisruptionBudget.maxUnavailable=50%,webhook.port=10260,"
                  "image.digest=sha256:" + "ab" * 32)
    assert result.returncode == 0, result.stderr


def test_default_pods_are_system_cluster_critical_and_off_the_host_network() -> None:
    objects = render()
    for component in ("webhook", "reconciler"):
        pod = find(objects, "Deployment", f"poolguard-{component}")["spec"]["template"]["spec"]
        assert pod["priorityClassName"] == "system-cluster-critical"
        assert "hostNetwork" not in pod and "dnsPolicy" not in pod
    assert not [o for o in objects if o["kind"] == "PodDisruptionBudget"
                and o["metadata"]["name"] == "poolguard-reconciler"]


def test_platform_values_rename_schedule_and_narrow_everything() -> None:
    objects = render(CHART / "ci" / "platform-values.yaml", namespace="pg")
    names = {o["metadata"]["name"] for o in objects}
    assert all(n.startswith("gpu-guard") for n in names - {"pg"}), sorted(names)
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["team"] == "platform", obj["metadata"]["name"]
        assert labels["app.kubernetes.io/name"] == "guard"

    webhook = find(objects, "Deployment", "gpu-guard-webhook")
    assert webhook["spec"]["revisionHistoryLimit"] == 2
    template = webhook["spec"]["template"]
    assert template["metadata"]["labels"]["example.com/tier"] == "system"
    assert template["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
    assert template["metadata"]["annotations"]["example.com/owner"] == "platform"
    pod = template["spec"]
    assert (pod["hostNetwork"], pod["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
    assert pod["priorityClassName"] == "platform-critical"
    assert pod["nodeSelector"] == {"node-role.example.com/system": "true"}
    assert pod["tolerations"][0]["key"] == "node-role.example.com/system"
    assert list(pod["affinity"]["podAntiAffinity"]) == [
        "requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    selector = webhook["spec"]["selector"]["matchLabels"]
    assert term["labelSelector"]["matchLabels"] == selector  # tpl followed nameOverride
    assert "topologySpreadConstraints" not in pod
    main = pod["containers"][0]
    assert main["image"] == ("registry.example.com/platform/poolguard@sha256:"
                             "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
    assert main["args"][main["args"].index("--port") + 1] == "10260"
    assert main["ports"] == [{"name": "https", "containerPort": 10260, "protocol": "TCP"}]
    assert main["env"][-1] == {"name": "TZ", "value": "UTC"}
    assert main["readinessProbe"]["periodSeconds"] == 3
    assert main["volumeMounts"][-1]["mountPath"] == "/etc/ssl/corporate"
    assert pod["volumes"][-1] == {"name": "extra-ca", "configMap": {"name": "corporate-ca"}}
    assert find(objects, "NetworkPolicy", "gpu-guard-webhook")["spec"]["ingress"] == [
        {"ports": [{"port": 10260, "protocol": "TCP"}]}]
    assert find(objects, "Namespace", "pg")["metadata"]["labels"][
        "pod-security.kubernetes.io/enforce"] == "privileged"
    account = find(objects, "ServiceAccount", "gpu-guard-webhook")
    assert account["metadata"]["annotations"]["example.com/role"] == "poolguard-webhook"

    reconciler = find(objects, "Deployment", "gpu-guard-reconciler")
    pod = reconciler["spec"]["template"]["spec"]
    assert "priorityClassName" not in pod
    main = pod["containers"][0]
    assert main["args"][-2:] == ["--lease-name", "gpu-guard-reconciler"]
    assert main["env"][-1] == {"name": "TZ", "value": "UTC"}
    lease_role = find(objects, "Role", "gpu-guard-reconciler-leader-election")
    assert lease_role["rules"][1]["resourceNames"] == ["gpu-guard-reconciler"]

    pdbs = {o["metadata"]["name"]: o["spec"] for o in objects
            if o["kind"] == "PodDisruptionBudget"}
    assert pdbs["gpu-guard-webhook"] == {"maxUnavailable": 1,
                                         "unhealthyPodEvictionPolicy": "AlwaysAllow",
                                         "selector": {"matchLabels": selector}}
    assert pdbs["gpu-guard-reconciler"]["minAvailable"] == "50%"

    hooks = {h["name"]: h for kind in ("MutatingWebhookConfiguration",
                                       "ValidatingWebhookConfiguration")
             for h in find(objects, kind, "gpu-guard")["webhooks"]}
    for hook in hooks.values():
        assert hook["clientConfig"]["service"]["name"] == "gpu-guard-webhook"
        assert hook["namespaceSelector"]["matchExpressions"][:2] == [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["kube-system", "pg"]},
            {"key": "poolguard.dev/skip", "operator": "NotIn", "values": ["true"]}]
    pods = hooks["pods.poolguard.dev"]
    assert pods["namespaceSelector"]["matchLabels"] == {"example.com/gpu": "true"}
    assert pods["objectSelector"]["matchExpressions"][0]["key"] == "example.com/batch"
    assert [c["name"] for c in pods["matchConditions"]] == ["not-skipped", "not-a-job"]
    assert hooks["scale.poolguard.dev"]["namespaceSelector"]["matchExpressions"][2][
        "key"] == "example.com/sandbox"
    assert "objectSelector" not in hooks["bindings.poolguard.dev"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert find(objects, kind, "gpu-guard")["metadata"]["annotations"][
            "example.com/owner"] == "platform"

    # the certificate hook and renewal name the renamed Service and webhook configurations
    args = certs_parser().parse_args(find(objects, "CronJob", "gpu-guard-certs-renewal")[
        "spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"])
    assert (args.service, args.webhook_configuration) == ("gpu-guard-webhook", "gpu-guard")
    assert find(objects, "ClusterRole", "gpu-guard-certs-renewal")["rules"][0][
        "resourceNames"] == ["gpu-guard"]

    monitors = [o for o in objects if o["kind"] == "PodMonitor"]
    assert {m["metadata"]["name"] for m in monitors} == {"gpu-guard-webhook",
                                                         "gpu-guard-reconciler"}
    assert not [o for o in objects if o["kind"] == "ServiceMonitor"]
    for monitor in monitors:
        assert monitor["metadata"]["namespace"] == "monitoring"
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["pg"]}
        component = monitor["metadata"]["labels"]["app.kubernetes.io/component"]
        deployment = find(objects, "Deployment", f"gpu-guard-{component}")
        assert monitor["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"][
            "matchLabels"]
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        ports = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0][
            "ports"]}
        assert endpoint["port"] in ports
        assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("15s", "10s")
        assert endpoint["relabelings"][0]["targetLabel"] == "team"


def test_null_and_empty_values_remove_the_default_scheduling() -> None:
    """affinity is a map (Helm merges a {} into the default): null removes it, as it does
    the topology spread constraints (a list, which a values file's [] also replaces: see
    the platform values)."""
    objects = render(sets=("webhook.affinity=null", "webhook.topologySpreadConstraints=null",
                           "reconciler.affinity=null"))
    for component in ("webhook", "reconciler"):
        pod = find(objects, "Deployment", f"poolguard-{component}")["spec"]["template"]["spec"]
        assert "affinity" not in pod and "topologySpreadConstraints" not in pod




def test_the_rewrite_brake_values_reach_the_reconciler() -> None:
    from webhook.cli.main import build_parser

    objects = render(sets=("reconciler.maxRewritePercent=50",
                           "reconciler.acceptRewrites=0123456789ab"))
    [container] = find(objects, "Deployment", "poolguard-reconciler")["spec"]["template"][
        "spec"]["containers"]
    args = container["args"]
    assert args[args.index("--max-rewrite-percent") + 1] == "50"
    assert args[args.index("--accept-rewrites") + 1] == "0123456789ab"
    parsed = build_parser().parse_args(args)
    assert (parsed.max_rewrite_percent, parsed.accept_rewrites) == (50, "0123456789ab")
    refused = subprocess.run([str(HELM), "template", "poolguard", str(CHART), "--set",
                              "reconciler.acceptRewrites=not-a-hash"],
                             capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "acceptRewrites" in refused.stderr
