"""Label and field selectors, as the fake API server reads a list's or a watch's."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from .errors import ApiError


def selected(obj: Mapping[str, Any], selectors: tuple[str, str]) -> bool:
    """Whether `obj` matches (labelSelector, fieldSelector); ApiError 400 for a bad one."""
    label_selector, field_selector = selectors
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return (all(_label_term(term, labels) for term in _split_terms(label_selector))
            and all(_field_term(term, obj) for term in _split_terms(field_selector)))


def _split_terms(selector: str) -> Iterator[str]:
    """Split a selector on the commas that are not inside parentheses."""
    depth, start = 0, 0
    for index, char in enumerate(selector + ","):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            term = selector[start:index].strip()
            if term:
                yield term
            start = index + 1


_SET_TERM = re.compile(r"^([^\s!=()]+)\s+(in|notin)\s+\((.*)\)$")
_EQ_TERM = re.compile(r"^([^\s!=()]+)\s*(==|=|!=)\s*([^\s]*)$")


def _label_term(term: str, labels: Mapping[str, str]) -> bool:
    if match := _SET_TERM.match(term):
        key, op, values = match.groups()
        wanted = {v.strip() for v in values.split(",")}
        return (labels.get(key) in wanted) if op == "in" else (labels.get(key) not in wanted)
    if match := _EQ_TERM.match(term):
        key, op, value = match.groups()
        return (labels.get(key) == value) if op != "!=" else (labels.get(key) != value)
    if term.startswith("!"):
        return term[1:].strip() not in labels
    if re.match(r"^[^\s!=()]+$", term):
        return term in labels
    raise ApiError(400, "BadRequest", f"unable to parse requirement: {term!r}")


def _field_term(term: str, obj: Mapping[str, Any]) -> bool:
    match = _EQ_TERM.match(term)
    if not match:
        raise ApiError(400, "BadRequest", f"invalid field selector: {term!r}")
    path, op, value = match.groups()
    current: Any = obj
    for part in path.split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    text = "" if current is None else str(current)
    return (text == value) if op != "!=" else (text != value)

