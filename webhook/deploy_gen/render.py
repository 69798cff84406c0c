"""Rules as the text of the deploy files: kustomize YAML, and Helm template lines that
guard a custom resource's rules with its `scaleCheck.kinds` switch."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .rules import Rule


def _value(value: tuple[str, ...] | str) -> str:
    if isinstance(value, str):
        return value
    return "[" + ", ".join(json.dumps(item) for item in value) + "]"


def rule_lines(rule: Rule) -> list[str]:
    """One rule as a YAML list item, its lists in flow style as the files write them."""
    return [("- " if index == 0 else "  ") + f"{key}: {_value(value)}"
            for index, (key, value) in enumerate(rule.fields)]


def yaml_lines(rules: Sequence[Rule], switched_comment: Sequence[str] = ()) -> list[str]:
    """The rules as plain YAML (kustomize has no switches); `switched_comment` goes before
    the first rule the chart switches."""
    lines: list[str] = []
    commented = False
    for rule in rules:
        if rule.switch and not commented:
            lines += [f"# {line}" if line else "#" for line in switched_comment]
            commented = True
        lines += rule_lines(rule)
    return lines


def helm_lines(rules: Sequence[Rule], switched: bool = True) -> list[str]:
    """The rules as Helm template lines: a switched rule only while
    `.Values.scaleCheck.kinds.<switch>` is true (`switched=False`: every rule, always)."""
    lines: list[str] = []
    for rule in rules:
        if switched and rule.switch:
            lines += [f"{{{{- if .Values.scaleCheck.kinds.{rule.switch} }}}}",
                      *rule_lines(rule), "{{- end }}"]
        else:
            lines += rule_lines(rule)
    return lines


def helm_define(name: str, lines: Sequence[str]) -> list[str]:
    """A named template whose body is `lines`, without leading or trailing newline."""
    return [f'{{{{- define "{name}" -}}}}', *lines, "{{- end -}}"]
