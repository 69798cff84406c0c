"""Argo Rollouts objects for the e2e tier: the real Rollout CRD, read from the controller's
own Go module (github.com/argoproj/argo-rollouts), and the Rollouts and Services the tests
make. The names and annotation keys are the controller's (pkg/apis/rollouts/v1alpha1,
utils/annotations)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.e2e.controlplane import wait_for
from tests.e2e.harness import Environment

MODULE = "github.com/argoproj/argo-rollouts"
VERSION = "v1.10.2"
GROUP, API_VERSION, PLURAL = "argoproj.io", "v1alpha1", "rollouts"
CRD_NAME = f"{PLURAL}.{GROUP}"
IDENTITY = ("argo-rollouts", "argo-rollouts")  # (namespace, ServiceAccount) of the controller
HASH_LABEL = "rollouts-pod-template-hash"  # v1alpha1.DefaultRolloutUniqueLabelKey
REVISION = "rollout.argoproj.io/revision"  # annotations.RevisionAnnotation
DESIRED = "rollout.argoproj.io/desired-replicas"  # annotations.DesiredReplicasAnnotation
DEADLINE = "scale-down-deadline"  # v1alpha1.DefaultReplicaSetScaleDownDeadlineAnnotationKey
MANAGED_BY = "argo-rollouts.argoproj.io/managed-by-rollouts"  # v1alpha1.ManagedByRolloutsKey
CANARY_PAUSE, BLUE_GREEN_PAUSE = "CanaryPauseStep", "BlueGreenPause"


# --- the Rollout CRD, from the controller's module ----------------------------------------

def rollout_crd(cache: Path | None = None) -> str:
    """manifests/crds/rollout-crd.yaml of the module, read from the zip the Go module proxy
    serves (`go mod download -json`; cached under ~/.cache/poolguard-e2e).

    The module's go.mod asks for a newer Go patch release than some machines have:
    `go mod download` then reports an error for the module but has already fetched the
    zip, whose path the JSON still names; nothing is built, so that is enough."""
    cache = cache or Path.home() / ".cache" / "poolguard-e2e" / f"argo-rollouts-{VERSION}"
    target = cache / "rollout-crd.yaml"
    if target.exists():
        return target.read_text()
    cache.mkdir(parents=True, exist_ok=True)
    go = shutil.which("go") or "/usr/local/go/bin/go"
    # GOTOOLCHAIN=local: never fetch a toolchain for the module's go line
    done = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{VERSION}"],
                          capture_output=True, text=True, check=False, cwd=cache,
                          env={**os.environ, "GOTOOLCHAIN": "local"})
    info = json.loads(done.stdout or "{}")
    if not info.get("Zip") or not Path(info["Zip"]).exists():
        raise RuntimeError(f"go mod download {MODULE}@{VERSION} failed:\n"
                           f"{done.stdout}\n{done.stderr}")
    with zipfile.ZipFile(info["Zip"]) as archive:
        text = archive.read(f"{MODULE}@{VERSION}/manifests/crds/rollout-crd.yaml").decode()
    target.write_text(text)
    return text


def install_rollout_crd(env: Environment) -> None:
    """The real Rollout CRD (its full schema and /scale subresource), once per cluster.

    Server-side apply: the CRD is too large for the last-applied annotation. A minimal CRD
    another test made under the same name is replaced."""
    env.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=e2e-crds",
                "-f", "-", stdin=rollout_crd(), check=True)

    def established() -> bool:  # `kubectl wait` fails while the status has no conditions
        crd = env.api_get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    wait_for(f"CRD {CRD_NAME} to be established", established, timeout=60)


# --- manifests ------------------------------------------------------------------------------

def canary_rollout(name: str, replicas: int, template: dict[str, Any], *,
                   steps: Sequence[Mapping[str, Any]] = (), max_surge: int | str = 1,
                   max_unavailable: int | str = 0, paused: bool = False,
                   min_ready_seconds: int = 0) -> dict[str, Any]:
    """A basic canary Rollout. maxSurge/maxUnavailable are always set: v1.10.2's defaults
    ("25", not a percentage) make `resolveFenceposts` fail and both resolve to 0."""
    return _rollout(name, replicas, template, paused, min_ready_seconds, {"canary": {
        "maxSurge": max_surge, "maxUnavailable": max_unavailable, "steps": list(steps)}})


def blue_green_rollout(name: str, replicas: int, template: dict[str, Any], *,
                       auto_promotion: bool = False, scale_down_delay: int | None = None,
                       preview_replicas: int | None = None, min_ready_seconds: int = 0
                       ) -> dict[str, Any]:
    """A blue-green Rollout with Services NAME-active and NAME-preview (`services`)."""
    strategy: dict[str, Any] = {"activeService": f"{name}-active",
                                "previewService": f"{name}-preview",
                                "autoPromotionEnabled": auto_promotion}
    if scale_down_delay is not None:
        strategy["scaleDownDelaySeconds"] = scale_down_delay
    if preview_replicas is not None:
        strategy["previewReplicaCount"] = preview_replicas
    return _rollout(name, replicas, template, False, min_ready_seconds, {"blueGreen": strategy})


def _rollout(name: str, replicas: int, template: dict[str, Any], paused: bool,
             min_ready_seconds: int, strategy: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{API_VERSION}", "kind": "Rollout",
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "paused": paused,
                     "minReadySeconds": min_ready_seconds,
                     "selector": {"matchLabels": {
                         "app": template["metadata"]["labels"]["app"]}},
                     "template": template, "strategy": strategy}}


def services(rollout: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The active and preview Services a blue-green Rollout names (the user makes them; the
    controller only moves their selectors)."""
    strategy = rollout["spec"]["strategy"]["blueGreen"]
    selector = rollout["spec"]["selector"]["matchLabels"]
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": strategy[key]},
             "spec": {"selector": dict(selector), "ports": [{"port": 80}]}}
            for key in ("activeService", "previewService")]
