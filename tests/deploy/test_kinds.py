"""The shipped manifests, chart and docs cover every kind of the registry.

Parametrised over the registry: a kind added there is held at once to RBAC (the webhook
lists and watches it), the webhook configurations (its updates and `/scale` reach the
scale check and the clamp), the chart's switch for a custom resource, and the README.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from webhook.core.kinds.registry import KINDS

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "manifests" / "base"
CHART = REPO / "charts" / "poolguard"
BY_NAME = pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def rules_of(path: str) -> list[dict]:
    """The rules of the webhook that calls `path`, in the kustomize base."""
    for doc in documents(BASE / "webhookconfigurations.yaml"):
        for webhook in doc.get("webhooks") or []:
            if webhook["clientConfig"]["service"]["path"] == path:
                return webhook["rules"]
    raise AssertionError(f"no webhook calls {path}")


def covered(rules: list[dict], group: str, version: str, resource: str) -> bool:
    return any(group in rule["apiGroups"] and version in rule["apiVersions"]
               and resource in rule["resources"] and "UPDATE" in rule["operations"]
               for rule in rules)


@BY_NAME
@pytest.mark.parametrize("path", ["/validate-scale", "/mutate-scale"])
def test_the_base_sends_its_scale_requests_to_the_scale_check(kind, path):
    version = kind.resource.api_version.rpartition("/")[2]
    rules = rules_of(path)
    assert covered(rules, kind.group, version, f"{kind.plural}/scale")
    assert covered(rules, kind.group, version, kind.plural)


@BY_NAME
def test_the_base_checks_the_templates_the_api_server_validates(kind):
    resources = {(group, resource) for rule in rules_of("/validate-workloads")
                 for group in rule["apiGroups"] for resource in rule["resources"]}
    assert ((kind.group, kind.plural) in resources) == kind.template_validated


@BY_NAME
def test_the_webhook_role_lists_and_watches_it(kind):
    role = next(doc for doc in documents(BASE / "rbac.yaml")
                if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == "poolguard-webhook")
    assert any(kind.group in rule["apiGroups"] and kind.plural in rule["resources"]
               and {"list", "watch"} <= set(rule["verbs"]) for rule in role["rules"])


@BY_NAME
def test_the_chart_has_its_rules_behind_a_switch_for_a_custom_resource(kind):
    rbac = (CHART / "templates" / "rbac.yaml").read_text()
    hooks = (CHART / "templates" / "webhookconfigurations.yaml").read_text()
    assert f'"{kind.plural}"' in rbac and f'"{kind.plural}/scale"' in hooks
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    switches = schema["properties"]["scaleCheck"]["properties"]["kinds"]["properties"]
    if kind.custom:
        assert values["scaleCheck"]["kinds"][kind.chart_switch] is True
        assert kind.chart_switch in switches
        assert f".Values.scaleCheck.kinds.{kind.chart_switch}" in hooks
        assert f".Values.scaleCheck.kinds.{kind.chart_switch}" in rbac
    else:
        assert kind.chart_switch not in values["scaleCheck"]["kinds"]


@BY_NAME
def test_the_readme_and_the_development_guide_name_it(kind):
    assert kind.kind in (REPO / "README.md").read_text()
    assert kind.kind in (REPO / "docs" / "development.md").read_text()
