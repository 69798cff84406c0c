"""A policy field: what the model declares of it, and how the parser names it in errors.

Each section of the policy is a frozen dataclass whose fields carry their description and
schema facts (`described`); the parser's known keys (`policy_keys`) and `policy_schema`'s
JSON Schema both come from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, field, fields
from typing import Any

from ..errors import InputError


class PolicyError(InputError):
    """A policy document that cannot be used; the message names the field."""


def described(description: str, default: Any = MISSING, *, key: str | None = None,
              schema: Mapping[str, Any] | None = None, default_factory: Any = MISSING,
              required: bool = False) -> Any:
    """A policy field with what its JSON Schema says beyond its Python type.

    `key` is its name in the policy file (default: the field's name in camelCase);
    `schema` adds keywords (enum, pattern, range) to those the type gives; `required`: a
    policy file must set it even though the model has a default. The parser's field names
    and policy_schema's JSON Schema both come from here.
    """
    metadata = {"description": description, "key": key, "schema": dict(schema or {}),
                "required": required}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def policy_key(model_field: Any) -> str:
    """A model field's name in the policy file."""
    key = model_field.metadata.get("key")
    if key:
        return str(key)
    head, *rest = model_field.name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def policy_keys(model: type) -> set[str]:
    """The keys a policy file may use in the object `model` describes."""
    return {policy_key(model_field) for model_field in fields(model)}


def reject_unknown(mapping: Mapping[str, Any], known: set[str], source: str, prefix: str) -> None:
    """Refuse the first key of `mapping` (in sorted order) that is not in `known`."""
    unknown = sorted(str(k) for k in mapping if k not in known)
    if unknown:
        raise PolicyError(f"{source}: {prefix}{unknown[0]}: unknown field "
                          f"(known: {', '.join(sorted(known))})")


def type_name(value: Any) -> str:
    """What kind of YAML value `value` is, in words ("a list", "a number")."""
    return {list: "a list", str: "a string", int: "a number", float: "a number",
            bool: "a boolean", type(None): "an empty value"}.get(type(value),
                                                                  type(value).__name__)


def shown(value: Any) -> str:
    """A value as the YAML a person wrote (Python's None, True and [...] mean nothing there)."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, int | float):
        return str(value)
    return type_name(value)
