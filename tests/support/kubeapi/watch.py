"""Watches of the fake API server: the events a change makes and who is watching."""

from __future__ import annotations

import socket
from collections import deque
from dataclasses import dataclass, field

from .resources import Obj, ResourceType
from .selectors import selected


@dataclass
class Event:
    """One change, numbered by the resourceVersion it made."""

    rv: int
    rtype: ResourceType
    type: str
    obj: Obj


@dataclass(eq=False)
class Watch:
    """One open watch: what it selects and the events queued for it."""

    rtype: ResourceType
    namespace: str | None
    selectors: tuple[str, str]
    conn: socket.socket
    queue: deque[Event] = field(default_factory=deque)
    closed: bool = False


def watch_wants(watch: Watch, event: Event) -> bool:
    """Whether `event` is of the watch's resource, namespace and selectors."""
    if event.rtype is not watch.rtype:
        return False
    namespace = (event.obj.get("metadata") or {}).get("namespace", "")
    if watch.namespace is not None and namespace != watch.namespace:
        return False
    return selected(event.obj, watch.selectors)
