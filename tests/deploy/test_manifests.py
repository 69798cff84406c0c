"""The kustomize manifests, rendered with `kubectl kustomize` and validated offline
against the Kubernetes OpenAPI schemas bundled in kubernetes-validate (strict: unknown
fields fail).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import kubernetes_validate.utils as kv
import pytest
import yaml

from certs import pki
from certs.manifests import inject_ca_bundle
from tests.support.install import (
    CERT_MANAGER_KINDS,
    DEPLOYMENT_CONTROLLER,
    K8S_VERSIONS,
    KUBECTL,
    NAMESPACE,
    OVERLAYS,
    REPO,
    SERVICE,
    SERVICE_NAMES,
    WEBHOOK_DOCS,
    _render,
    certs_cli,
    find,
    needs_kubectl,
    pod_spec,
    rendered,
    run,
    webhooks,
)
from webhook.core.kinds.registry import KINDS

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
        ("Role", "poolguard-webhook-events"), ("RoleBinding", "poolguard-webhook-events"),
        ("ConfigMap", "poolguard-policy"),
        ("Deployment", "poolguard-webhook"), ("Deployment", "poolguard-reconciler"),
        ("Service", "poolguard-webhook"), ("PodDisruptionBudget", "poolguard-webhook"),
        ("Service", "poolguard-webhook-metrics"), ("Service", "poolguard-reconciler-metrics"),
        ("MutatingWebhookConfiguration", "poolguard"),
        ("ValidatingWebhookConfiguration", "poolguard"),
        ("NetworkPolicy", "poolguard-webhook"), ("NetworkPolicy", "poolguard-reconciler"),
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
    assert checked == 22


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
    assert list(hooks) == ["pods.poolguard.dev", "bindings.poolguard.dev", "clamp.poolguard.dev"]
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
        # The custom resources by their own group and served version; Equivalent maps a
        # request through another version of the same resource onto these.
        *({"apiGroups": [kind.group],
           "apiVersions": [kind.resource.api_version.rpartition("/")[2]],
           "scope": "Namespaced", "operations": ["UPDATE"],
           "resources": [kind.plural, f"{kind.plural}/scale"]}
          for kind in KINDS if kind.custom),
    ]
    assert scale["matchPolicy"] == "Equivalent"
    assert workloads["rules"] == [{**apps, "operations": ["CREATE", "UPDATE"],
                                   "resources": ["deployments", "replicasets", "statefulsets"]}]
    conditions = {c["name"]: c["expression"] for c in scale["matchConditions"]}
    assert (f"request.userInfo.username != '{DEPLOYMENT_CONTROLLER}'"
            in conditions.values())
    # The exemption is on the scale check only: templates are checked for everyone.
    assert DEPLOYMENT_CONTROLLER not in json.dumps(workloads)


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_clamp_webhook_is_called_only_for_the_policys_autoscalers_and_lower_counts(
        overlay: str) -> None:
    objects = rendered(overlay)
    clamp = webhooks(objects, "MutatingWebhookConfiguration")["clamp.poolguard.dev"]
    scale = webhooks(objects, "ValidatingWebhookConfiguration")["scale.poolguard.dev"]
    _common_webhook_checks(clamp, "/mutate-scale")
    assert clamp["timeoutSeconds"] <= 3
    assert clamp["rules"] == scale["rules"]  # the same requests, clamped before the check
    conditions = {c["name"]: " ".join(c["expression"].split())
                  for c in clamp["matchConditions"]}
    policy_map = find(objects, "ConfigMap", "poolguard-policy")["data"]["policy.yaml"]
    users = yaml.safe_load(policy_map)["scaleDown"]["autoscalers"]["users"]
    assert users and conditions["clamped-users"] == (
        "request.userInfo.username in [" + ", ".join(f"'{u}'" for u in users) + "]")
    assert conditions["replicas-decrease"] == " ".join(
        next(c["expression"] for c in scale["matchConditions"]
             if c["name"] == "replicas-decrease").split())


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
    mutating = webhooks(objects, "MutatingWebhookConfiguration")
    for hook in (mutating["pods.poolguard.dev"], mutating["bindings.poolguard.dev"]):
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

    def clamp_matches(new: int | None, old: int, username: str) -> bool:
        spec_new = {} if new is None else {"replicas": new}
        return all(evaluate(c["expression"], request={"userInfo": {"username": username}},
                            object={"metadata": {"name": "d"}, "spec": spec_new},
                            oldObject={"metadata": {"name": "d"}, "spec": {"replicas": old}})
                   for c in mutating["clamp.poolguard.dev"]["matchConditions"])

    hpa = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
    assert clamp_matches(2, 5, hpa)
    assert clamp_matches(None, 5, "system:serviceaccount:keda:keda-operator")  # to zero
    assert clamp_matches(2, 5, "system:serviceaccount:knative-serving:controller")
    assert not clamp_matches(6, 5, hpa)
    assert not clamp_matches(2, 5, "alice")
    assert not clamp_matches(2, 5, DEPLOYMENT_CONTROLLER)


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
    # the reconciler's leader election reads these; the webhook only its namespace, for
    # --policy-configmap $(POD_NAMESPACE)/poolguard-policy
    expected = ({"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
                if container["args"][0] == "reconcile"
                else {"POD_NAMESPACE": "metadata.namespace"})
    configmap = container["args"][container["args"].index("--policy-configmap") + 1]
    assert configmap == "$(POD_NAMESPACE)/poolguard-policy"
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
                                 "--policy-configmap", "$(POD_NAMESPACE)/poolguard-policy",
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
                                 "--metrics-port", "9090",
                                 "--policy-configmap", "$(POD_NAMESPACE)/poolguard-policy"]
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
@needs_kubectl
def test_network_policies_admit_exactly_the_ports_the_pods_serve() -> None:
    """Each Deployment's pods are selected by one NetworkPolicy whose only ingress rule
    opens exactly their container ports: the webhook's 8443, the reconciler's 9090."""
    objects = rendered("self-signed")
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    for deployment in (o for o in objects if o["kind"] == "Deployment"):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        selecting = [p for p in policies if all(
            labels.get(k) == v for k, v in p["spec"]["podSelector"]["matchLabels"].items())]
        assert len(selecting) == 1, deployment["metadata"]["name"]
        spec = selecting[0]["spec"]
        assert spec["policyTypes"] == ["Ingress"]
        served = {(port["protocol"], port["containerPort"])
                  for container in deployment["spec"]["template"]["spec"]["containers"]
                  for port in container.get("ports", [])}
        [rule] = spec["ingress"]
        assert {(port["protocol"], port["port"]) for port in rule["ports"]} == served
    assert {p["metadata"]["name"] for p in policies} == {"poolguard-webhook",
                                                         "poolguard-reconciler"}


def test_rbac_is_least_privilege() -> None:
    objects = rendered("self-signed")
    read = ("get", "list", "watch")
    watch = ("list", "watch")  # the webhook reads only through its watch caches
    webhook = {("", r, v, ()) for r in ("pods", "nodes", "namespaces") for v in watch}
    webhook |= {("apps", r, v, ()) for r in ("deployments", "replicasets", "statefulsets")
                for v in watch}
    webhook |= {(kind.group, kind.plural, v, ()) for kind in KINDS if kind.custom
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
    from webhook.cluster.state import load_policy

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
    assert len(hooks) == 5
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
