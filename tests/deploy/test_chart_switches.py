"""The chart's switches: each custom workload kind's rules and read access
(scaleCheck.kinds), and the reconciler.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.chart import (
    CHART,
    find,
    kinds,
    render,
)
from webhook.core.kinds.registry import KINDS

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
