"""Argo Rollouts objects for the e2e tier: the Rollouts and Services the tests make. The
names and annotation keys are the controller's (github.com/argoproj/argo-rollouts
pkg/apis/rollouts/v1alpha1, utils/annotations)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

GROUP, API_VERSION = "argoproj.io", "v1alpha1"
HASH_LABEL = "rollouts-pod-template-hash"  # v1alpha1.DefaultRolloutUniqueLabelKey
DESIRED = "rollout.argoproj.io/desired-replicas"  # annotations.DesiredReplicasAnnotation
DEADLINE = "scale-down-deadline"  # v1alpha1.DefaultReplicaSetScaleDownDeadlineAnnotationKey


# --- manifests ------------------------------------------------------------------------------

def canary_rollout(name: str, replicas: int, template: dict[str, Any], *,
                   steps: Sequence[Mapping[str, Any]] = (), max_surge: int | str = 1,
                   max_unavailable: int | str = 0, paused: bool = False,
                   min_ready_seconds: int = 0, nginx: bool = False,
                   dynamic_stable_scale: bool = False) -> dict[str, Any]:
    """A canary Rollout. maxSurge/maxUnavailable are always set: v1.10.2's defaults
    ("25", not a percentage) make `resolveFenceposts` fail and both resolve to 0.

    With `nginx`, traffic routing through the NGINX Ingress kind: Services NAME-stable and
    NAME-canary and the Ingress NAME-stable (`traffic_objects`); the controller writes a
    canary Ingress beside it and needs no ingress controller to do so."""
    canary: dict[str, Any] = {"maxSurge": max_surge, "maxUnavailable": max_unavailable,
                              "steps": list(steps)}
    if nginx:
        canary.update({"stableService": f"{name}-stable", "canaryService": f"{name}-canary",
                       "trafficRouting": {"nginx": {"stableIngress": f"{name}-stable"}}})
    if dynamic_stable_scale:
        canary["dynamicStableScale"] = True
    return _rollout(name, replicas, template, paused, min_ready_seconds, {"canary": canary})


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
    """The Services a Rollout names (active and preview for blue-green; stable and canary
    for a traffic-routed canary, with its stable Ingress): the user makes them, the
    controller moves their selectors."""
    strategy = rollout["spec"]["strategy"]
    selector = rollout["spec"]["selector"]["matchLabels"]
    keys = (("activeService", "previewService") if "blueGreen" in strategy
            else ("stableService", "canaryService"))
    named = strategy.get("blueGreen") or strategy["canary"]
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": named[key]},
         "spec": {"selector": dict(selector), "ports": [{"port": 80}]}}
        for key in keys if key in named]
    nginx = (named.get("trafficRouting") or {}).get("nginx")
    if nginx:
        backend = {"service": {"name": named["stableService"], "port": {"number": 80}}}
        objects.append({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": nginx["stableIngress"]},
            "spec": {"ingressClassName": "nginx", "rules": [{"host": "e2e.local", "http": {
                "paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}]}})
    return objects
