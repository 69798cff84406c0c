"""Which generated block of which deploy file holds what, and the chart schema's switches.

Paths are relative to the repository root. The kustomize base grants and routes every
kind; the chart guards a custom resource's rules with its `scaleCheck.kinds` switch, except
the rebalancer's, which lists every kind as the rebalance overlay does.
"""

from __future__ import annotations

import json
from typing import Any

from .render import helm_define, helm_lines, yaml_lines
from .rules import chart_switches, read_rules, scale_rules, template_rules

BASE_RBAC = "manifests/base/rbac.yaml"
BASE_WEBHOOKS = "manifests/base/webhookconfigurations.yaml"
REBALANCE_RBAC = "manifests/overlays/rebalance/rebalancer-rbac.yaml"
CHART_RBAC = "charts/poolguard/templates/rbac.yaml"
CHART_WEBHOOKS = "charts/poolguard/templates/webhookconfigurations.yaml"
CHART_VALUES = "charts/poolguard/values.yaml"
CHART_SCHEMA = "charts/poolguard/values.schema.json"

_SCALE_COMMENT = (
    "Custom resources with a /scale subresource, judged where their CRDs are installed",
    "(a rule for a CRD that is not installed matches nothing and costs nothing). The",
    "chart switches each off with scaleCheck.kinds.")
_READ_COMMENT = (
    "Custom resources, read where their CRDs are installed (without them a list answers 404",
    "and the cache goes on without the kind). The chart leaves a kind out with",
    "scaleCheck.kinds.")
WEBHOOK_VERBS = ("list", "watch")  # the webhook's caches list and watch
REBALANCER_VERBS = ("list",)  # the rebalancer lists what `plan` reads, once a step


def blocks() -> dict[str, dict[str, list[str]]]:
    """Every file's generated blocks: {path: {block name: its lines, unindented}}."""
    scale, templates = scale_rules(), template_rules()
    webhook_reads, rebalancer_reads = read_rules(WEBHOOK_VERBS), read_rules(REBALANCER_VERBS)
    return {
        BASE_RBAC: {"webhook-read-rules": yaml_lines(webhook_reads, _READ_COMMENT)},
        BASE_WEBHOOKS: {"scale-rules": yaml_lines(scale, _SCALE_COMMENT),
                        "template-rules": yaml_lines(templates)},
        REBALANCE_RBAC: {"rebalancer-read-rules": yaml_lines(rebalancer_reads)},
        CHART_RBAC: {"webhook-read-rules": helm_lines(webhook_reads),
                     "rebalancer-read-rules": helm_lines(rebalancer_reads, switched=False)},
        CHART_WEBHOOKS: {"scale-rules": helm_define("poolguard.scaleRules", helm_lines(scale)),
                         "template-rules": helm_lines(templates)},
        CHART_VALUES: {"chart-switches": [f"{switch}: true  # {what}"
                                          for switch, what in chart_switches()]},
    }


def schema_with_switches(schema: dict[str, Any]) -> dict[str, Any]:
    """The chart's values schema with `scaleCheck.kinds` allowing exactly the switches."""
    kinds = schema["properties"]["scaleCheck"]["properties"]["kinds"]
    kinds["properties"] = {switch: {"type": "boolean"} for switch, _ in chart_switches()}
    return schema


def schema_text(text: str) -> str:
    """values.schema.json's text with its switches regenerated, formatted as
    `make chart-schema` writes it."""
    return json.dumps(schema_with_switches(json.loads(text)), indent=2) + "\n"
