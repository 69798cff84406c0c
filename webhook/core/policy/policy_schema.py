"""The policy's JSON Schema, generated from the policy model (the sections' dataclasses).

Each field's Python type gives its JSON type; `described` metadata gives its key, its
description and the keywords the type cannot say (enums, ranges, patterns). The chart's
values.schema.json carries this schema under `policy`, so `helm install` refuses what
`serve` and `policy check` would refuse at start, with the value's path; a field added to
the model appears in the schema by regenerating it (`make chart-schema`).

Rules across fields (duplicate pool names, protected pools' costs above the others, a
user both exempt and an autoscaler) are beyond JSON Schema; the chart checks them when
it renders (templates/_helpers.tpl).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from .policy import Policy
from .policy_field import policy_key

SCHEMA_DIALECT = "http://json-schema.org/draft-07/schema#"


def policy_schema() -> dict[str, Any]:
    """The JSON Schema (draft 7) of a policy file."""
    return {"$schema": SCHEMA_DIALECT, "title": "poolguard policy",
            **object_schema(Policy)}


def object_schema(model: type) -> dict[str, Any]:
    """The schema of the object a model dataclass describes: its fields, nothing else."""
    hints = typing.get_type_hints(model)
    properties: dict[str, Any] = {}
    required = []
    for model_field in fields(model):
        key = policy_key(model_field)
        schema = _merged(type_schema(hints[model_field.name]),
                         model_field.metadata.get("schema") or {})
        if model_field.metadata.get("description"):
            schema = {"description": model_field.metadata["description"], **schema}
        if model_field.metadata.get("required") or (
                model_field.default is MISSING and model_field.default_factory is MISSING):
            required.append(key)
        elif model_field.default is not MISSING:
            schema["default"] = _plain(model_field.default)
        properties[key] = schema
    schema = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    return schema


_SIMPLE = {bool: "boolean", int: "integer", str: "string", float: "number"}


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of a field's Python type; TypeError for a type it cannot say."""
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    if is_dataclass(hint):
        return object_schema(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (tuple, list):
        return {"type": "array", "items": type_schema(args[0])}
    if origin in (Mapping, dict):
        return {"type": "object"}
    if origin in (typing.Union, types.UnionType):
        parts = [type_schema(arg) for arg in args]
        if all(set(part) == {"type"} for part in parts):
            return {"type": [part["type"] for part in parts]}
        return {"anyOf": parts}
    raise TypeError(f"the policy schema cannot describe the type {hint!r}; give the field "
                    "a schema in its `described` metadata")


def _merged(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `extra`'s keywords; nested objects (such as `items`) merged too."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def _plain(value: Any) -> Any:
    """A default as JSON holds it (tuples as lists)."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value
