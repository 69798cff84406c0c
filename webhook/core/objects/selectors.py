"""Label selectors with Kubernetes semantics (metav1.LabelSelectorAsSelector)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InputError

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_EXPRESSION_KEYS = ("key", "operator", "values")

# What validate_selector accepts, as JSON Schema (draft 7); absent or null parts are empty.
LABEL_SELECTOR_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
        "matchExpressions": {"type": ["array", "null"], "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["key", "operator"],
            "properties": {"key": {"type": "string"}, "operator": {"enum": list(OPERATORS)},
                           "values": {"type": ["array", "null"], "items": {"type": "string"}}},
            "allOf": [
                {"if": {"properties": {"operator": {"enum": ["In", "NotIn"]}}},
                 "then": {"required": ["values"],
                          "properties": {"values": {"type": "array", "minItems": 1}}}},
                {"if": {"properties": {"operator": {"enum": ["Exists", "DoesNotExist"]}}},
                 "then": {"properties": {"values": {"maxItems": 0}}}},
            ],
        }},
    },
}


class SelectorError(InputError):
    """A selector the API server would not accept."""


def validate_selector(selector: Any, where: str) -> None:
    """Raise SelectorError naming `where` when `selector` is not a LabelSelector."""
    if selector is None:
        return
    if not isinstance(selector, Mapping):
        raise SelectorError(f"{where}: must be a label selector mapping")
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise SelectorError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    labels = _or_empty(selector.get("matchLabels"), {})
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise SelectorError(f"{where}.matchLabels: must map label names to string values")
    expressions = _or_empty(selector.get("matchExpressions"), [])
    if not isinstance(expressions, list):
        raise SelectorError(f"{where}.matchExpressions: must be a list")
    for index, expr in enumerate(expressions):
        _validate_expression(expr, f"{where}.matchExpressions[{index}]")


def _validate_expression(expr: Any, where: str) -> None:
    if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
        raise SelectorError(f"{where}: needs a string 'key'")
    unknown = sorted(str(k) for k in expr if k not in _EXPRESSION_KEYS)
    if unknown:
        raise SelectorError(f"{where}.{unknown[0]}: unknown field (known: "
                            f"{', '.join(_EXPRESSION_KEYS)})")
    operator = expr.get("operator")
    if operator is None:
        raise SelectorError(f"{where}.operator: is required (one of {', '.join(OPERATORS)})")
    if operator not in OPERATORS:
        raise SelectorError(f"{where}.operator: {operator!r} is not one of {', '.join(OPERATORS)}")
    values = _or_empty(expr.get("values"), [])
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SelectorError(f"{where}.values: must be a list of strings")
    if operator in ("In", "NotIn") and not values:
        raise SelectorError(f"{where}.values: must be non-empty for operator {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise SelectorError(f"{where}.values: must be empty for operator {operator}")


def _or_empty(value: Any, empty: Any) -> Any:
    """`empty` for an absent or null value; a false, 0 or "" stays (and is refused)."""
    return empty if value is None else value


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """True when `labels` satisfy `selector`; absent or empty selects everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_expression_matches(expr, labels) for expr in selector.get("matchExpressions") or [])


def workload_selector_matches(selector: Mapping[str, Any] | None,
                              labels: Mapping[str, str]) -> bool:
    """A workload's `spec.selector`: unlike policy selectors, an empty one selects nothing.

    The controllers treat a nil selector as matching nothing; the API server rejects an
    empty one on apps/v1 workloads, so nothing real depends on the difference.
    """
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    return selector_matches(selector, labels)


def compile_workload_selector(
        selector: Mapping[str, Any] | None) -> Callable[[Mapping[str, str]], bool]:
    """`workload_selector_matches` for one selector, prepared once for many pods.

    A selector of matchLabels only (what controllers write) becomes one subset test of
    dict items, done in C.
    """
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return _match_nothing
    match_labels = selector.get("matchLabels") or {}
    if selector.get("matchExpressions") or not all(
            isinstance(v, str) for v in match_labels.values()):
        return lambda labels: selector_matches(selector, labels)
    wanted = dict(match_labels).items()
    return lambda labels: wanted <= labels.items()


def _match_nothing(labels: Mapping[str, str]) -> bool:
    return False


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expr["key"], expr["operator"], expr.get("values") or []
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False
