"""The Helm chart charts/poolguard: lint, render, schema-validate, and match the kustomize base.

helm is built from the Go module proxy by `make helm` (mk/chart.mk; `make test` does it
first). Every values file in charts/poolguard/ci/ is a documented combination
(docs/install.md "Helm"): each one lints, renders and validates against the Kubernetes
schemas, strictly. With the default values the chart renders the same objects as
`kubectl kustomize manifests/overlays/self-signed`, so the two cannot drift apart.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate.utils as kv
import pytest
import yaml

from certs import pki
from certs.cli import build_parser as certs_parser
from webhook.cluster.state import load_policy
from webhook.core.kinds.registry import KINDS

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "poolguard"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
HELM_GOMOD = REPO / "tests" / "deploy" / "gomod" / "helm" / "go.mod"
HELM_VERSION = re.search(r"^require helm\.sh/helm/v3 (\S+)$", HELM_GOMOD.read_text(),
                         re.M).group(1)
HELM = Path.home() / ".cache" / "poolguard-e2e" / f"helm-{HELM_VERSION}" / "helm"
KUBECTL = shutil.which("kubectl")
K8S_VERSIONS = ("1.30.0", kv.latest_version())
CRD_KINDS = {"Issuer", "Certificate", "ServiceMonitor", "PodMonitor", "PrometheusRule"}
CHART_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")


def _helm() -> Path:
    """The helm binary, built with `make helm` when Go is there; skip loudly without Go."""
    if HELM.is_file():
        return HELM
    if shutil.which("go") is None:
        pytest.skip(f"SKIPPED: Go is not installed, so helm {HELM_VERSION} cannot be built "
                    "from the module proxy; the chart is NOT tested on this machine")
    built = subprocess.run(["make", "--no-print-directory", "helm"], cwd=REPO,
                           capture_output=True, text=True, timeout=1800, check=False)
    assert built.returncode == 0 and HELM.is_file(), built.stdout + built.stderr
    return HELM


def helm(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(_helm()), *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=False)


@cache
def _template(values: tuple[str, ...], sets: tuple[str, ...], namespace: str) -> str:
    args: list[str | Path] = ["template", "poolguard", CHART, "--namespace", namespace]
    for path in values:
        args += ["--values", path]
    for assignment in sets:
        args += ["--set", assignment]
    result = helm(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(*values: Path, sets: tuple[str, ...] = (),
           namespace: str = "poolguard") -> list[dict[str, Any]]:
    """`helm template` with these values files and --set assignments, as objects."""
    text = _template(tuple(map(str, values)), sets, namespace)
    return [copy.deepcopy(doc) for doc in yaml.safe_load_all(text) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def kinds(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}


def is_hook(obj: dict[str, Any]) -> bool:
    return "helm.sh/hook" in obj["metadata"].get("annotations", {})


RENEWAL = "poolguard-certs-renewal"
RENEWAL_OBJECTS = {(kind, RENEWAL) for kind in ("ServiceAccount", "Role", "RoleBinding",
                                               "ClusterRole", "ClusterRoleBinding", "CronJob")}


def is_chart_only(obj: dict[str, Any]) -> bool:
    """The objects only the chart has: its certificate hook (kustomize users run
    `python -m certs` themselves) and the renewal CronJob that runs the same command."""
    return is_hook(obj) or (obj["kind"], obj["metadata"]["name"]) in RENEWAL_OBJECTS


def container(objects: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    return find(objects, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]


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


def _normalize(obj: dict[str, Any]) -> dict[str, Any]:
    """What may differ between the chart and kustomize, removed: who manages it, the empty
    caBundle placeholders (the chart leaves the field to whoever injects it), and the policy
    file's comments (the parsed policy is compared)."""
    obj = copy.deepcopy(obj)
    for meta in (obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata", {})):
        for label in CHART_ONLY_LABELS:
            meta.get("labels", {}).pop(label, None)
    for hook in obj.get("webhooks", []):
        assert hook["clientConfig"].pop("caBundle", "") == ""
    if obj["kind"] == "ConfigMap" and "policy.yaml" in obj.get("data", {}):
        obj["data"]["policy.yaml"] = yaml.safe_load(obj["data"]["policy.yaml"])
    return obj


@cache
def _kustomize(overlay: str) -> str:
    result = subprocess.run([KUBECTL, "kustomize", REPO / "manifests" / "overlays" / overlay],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def kustomized(overlay: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(_kustomize(overlay)) if doc]


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


# Every custom resource of the registry, by its chart switch: (API group, resource).
CUSTOM_KINDS = {kind.chart_switch: (kind.group, kind.plural) for kind in KINDS if kind.custom}


def _scale_rule_groups(objects: list[dict[str, Any]]) -> dict[str, list[tuple[str, ...]]]:
    """The (group, resource) pairs each scale webhook (scale, clamp) has rules for."""
    hooks = {hook["name"]: hook for obj in objects
             if obj["kind"].endswith("WebhookConfiguration") for hook in obj["webhooks"]}
    return {name: [(group, resource) for rule in hooks[name]["rules"]
                   for group in rule["apiGroups"] for resource in rule["resources"]]
            for name in ("scale.poolguard.dev", "clamp.poolguard.dev")}


def _webhook_role_groups(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
    role = find(objects, "ClusterRole", "poolguard-webhook")
    return {(group, resource) for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"]}


@pytest.mark.parametrize("switched_off", sorted(CUSTOM_KINDS))
def test_each_custom_kind_is_switched_off_alone(switched_off: str) -> None:
    """scaleCheck.kinds.X=false drops X's scale rules (scale check and clamp) and its read
    access, and nothing else; on by default (the kustomize parity test holds that)."""
    default, off = render(), render(sets=(f"scaleCheck.kinds.{switched_off}=false",))
    group, resource = CUSTOM_KINDS[switched_off]
    gone = {(group, resource), (group, f"{resource}/scale")}
    for name, pairs in _scale_rule_groups(default).items():
        assert gone <= set(pairs), name
        assert _scale_rule_groups(off)[name] == [p for p in pairs if p not in gone], name
    assert _webhook_role_groups(off) == _webhook_role_groups(default) - {(group, resource)}
    others = [o for o in default if not o["kind"].endswith("WebhookConfiguration")
              and (o["kind"], o["metadata"]["name"]) != ("ClusterRole", "poolguard-webhook")]
    assert others == [o for o in off if not o["kind"].endswith("WebhookConfiguration")
                      and (o["kind"], o["metadata"]["name"])
                      != ("ClusterRole", "poolguard-webhook")]


def test_every_custom_kind_off_leaves_the_apps_rules() -> None:
    off = render(sets=tuple(f"scaleCheck.kinds.{switch}=false" for switch in CUSTOM_KINDS))
    for name, pairs in _scale_rule_groups(off).items():
        assert {group for group, _ in pairs} == {"apps"}, name
    assert {group for group, _ in _webhook_role_groups(off)} == {"", "apps"}


def test_reconciler_off_removes_all_of_it() -> None:
    objects = render(sets=("reconciler.enabled=false",))
    assert not [o for o in objects if "reconciler" in o["metadata"]["name"]]
    assert ("Deployment", "poolguard-webhook") in kinds(objects)
    with_monitoring = render(CHART / "ci" / "monitoring-values.yaml",
                             sets=("reconciler.enabled=false",))
    assert not [o for o in with_monitoring if "reconciler" in o["metadata"]["name"]]


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


# --------------------------------------------------------------------------- the docs


def _doc_commands(*docs: Path) -> list[list[str]]:
    """Shell commands in fenced sh blocks and in inline `...` spans of these docs."""
    commands = []
    for doc in docs:
        text = doc.read_text()
        snippets = []
        for block in re.findall(r"```sh[^\n]*\n(.*?)```", text, re.S):
            joined = re.sub(r"\\\n\s*", " ", block)
            snippets += [re.sub(r"\s#\s.*$", "", line).strip() for line in joined.splitlines()]
        # Inline spans with flags are commands; `python -m webhook plan` alone is a name.
        snippets += [span for span in re.findall(
            r"`((?:helm|kubectl poolguard|python -m webhook) [^`]+)`", text) if " -" in span]
        for snippet in filter(None, snippets):
            for part in re.split(r"\s(?:\||&&)\s", snippet):
                words = part.split()
                if words:
                    commands.append(words)
    return commands


def _has_value(path: str) -> bool:
    node: Any = yaml.safe_load((CHART / "values.yaml").read_text())
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def test_doc_commands_use_real_values_files_and_flags() -> None:
    from webhook.cli.kubectl_plugin import build_parser as plugin_parser
    from webhook.cli.main import build_parser as webhook_parser

    docs = (REPO / "docs" / "install.md", REPO / "README.md", REPO / "docs" / "plan.md",
            REPO / "docs" / "policy.md", REPO / "docs" / "gitops.md")
    seen = {"helm": 0, "plugin": 0, "webhook": 0}
    placeholders = {"N": "3"}  # the docs' placeholders, made parseable
    for words in _doc_commands(*docs):
        words = [placeholders.get(w, w) for w in words]
        if words[0] == "helm":
            seen["helm"] += 1
            for flag, arg in itertools.pairwise(words):
                if flag == "--set":
                    for assignment in arg.split(","):
                        key = assignment.split("=", 1)[0]
                        assert _has_value(key), f"helm --set {key}: no such value"
                if flag in ("-f", "--values"):
                    assert (REPO / arg).is_file(), arg
        elif words[:2] == ["kubectl", "poolguard"]:
            seen["plugin"] += 1
            plugin_parser().parse_known_args(words[2:])  # SystemExit (fails) if unusable
        elif words[:3] == ["python", "-m", "webhook"] and len(words) > 4 and not any(
                w.startswith("[") for w in words):  # synopses with [optional] parts are not
            seen["webhook"] += 1
            webhook_parser().parse_args(words[3:])
    assert seen["helm"] >= 3 and seen["plugin"] >= 2 and seen["webhook"] >= 2, seen


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
