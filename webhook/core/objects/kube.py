"""Small readers for Kubernetes object dicts, shared by the whole core."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

Obj = Mapping[str, Any]


def meta(obj: Obj) -> Mapping[str, Any]:
    """`metadata`, or an empty mapping when absent."""
    return obj.get("metadata") or {}


def name_of(obj: Obj) -> str:
    return meta(obj).get("name") or ""


def namespace_of(obj: Obj) -> str:
    return meta(obj).get("namespace") or ""


def uid_of(obj: Obj) -> str:
    return meta(obj).get("uid") or ""


def labels_of(obj: Obj) -> Mapping[str, str]:
    return meta(obj).get("labels") or {}


def annotations_of(obj: Obj) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def spec_of(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def status_of(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}


def controller_ref(obj: Obj) -> Mapping[str, Any] | None:
    """The owner reference with `controller: true`, as metav1.GetControllerOf."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def parse_time_ns(value: str | None) -> int | None:
    """An RFC 3339 timestamp as nanoseconds since the epoch; None for absent (Go's zero time)."""
    if not value:
        return None
    return _parse_time_ns(value)


@lru_cache(maxsize=1 << 16)  # pods share timestamps, and the webhook sees the same pods often
def _parse_time_ns(value: str) -> int:
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return ((parsed - _EPOCH) // _MICROSECOND) * 1000


def format_time_ns(value_ns: int) -> str:
    """Nanoseconds since the epoch as RFC 3339 (second precision, like metav1.Time)."""
    return (_EPOCH + timedelta(microseconds=value_ns // 1000)).strftime("%Y-%m-%dT%H:%M:%SZ")


def replicas_of(obj: Obj, default: int = 1) -> int:
    """`spec.replicas`, defaulted to 1 as the API server does."""
    value = spec_of(obj).get("replicas")
    return default if value is None else int(value)



def go_parse_int(text: str, bits: int = 64, signed: bool = True) -> int | None:
    """strconv.ParseInt(text, 10, bits) (or ParseUint when not `signed`); None on error.

    Go takes an optional sign (ParseInt only) and ASCII digits, no spaces or
    underscores in base 10; Python's int() accepts all of those, so it is not used
    unguarded. Leading zeros are fine ("-007" is -7).
    """
    if not isinstance(text, str):
        return None
    negative = signed and text[:1] == "-"
    digits = text[1:] if signed and text[:1] in ("+", "-") else text
    if not (digits.isascii() and digits.isdigit()):  # ASCII 0-9 only, and not empty
        return None
    significant = digits.lstrip("0") or "0"
    if len(significant) > 20:  # beyond any 64-bit value; int() of huge strings would raise
        return None
    number = -int(significant) if negative else int(significant)
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return number if low <= number <= high else None
