"""Helpers for tests that use the fake API server: objects out of List documents, and
polling with a timeout instead of sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .resources import Obj


def items_of(documents: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """Objects from documents that may be Lists (such as a state file), flattened."""
    objects: list[Obj] = []
    for doc in documents:
        if str(doc.get("kind", "")).endswith("List"):
            objects.extend(items_of(doc.get("items") or []))
        else:
            objects.append(dict(doc))
    return objects


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01,
               message: str = "condition") -> Any:
    """Poll `predicate` until it returns a truthy value (returned); AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
