"""The Helm chart's test helpers: helm (built by `make helm`), `helm template` and
`kubectl kustomize` renders as objects, and the chart-only objects."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate.utils as kv
import pytest
import yaml

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
