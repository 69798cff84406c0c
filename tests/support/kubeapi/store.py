"""The fake API server's storage, as etcd and the watch cache keep it: objects by
resource and key, one global resourceVersion counter ordering every change, the history
of events a watch can resume from, and the open watches.

Every method is called with `cond` held; `cond` is notified on each change.
"""

from __future__ import annotations

import copy
import socket
import threading
import uuid
from collections import deque
from datetime import UTC, datetime

from .errors import ApiError
from .patch import patched
from .resources import (
    CUSTOM_RESOURCE_TYPES,
    RESOURCE_TYPES,
    Obj,
    ResourceType,
    key_of,
    resource_name,
)
from .selectors import selected
from .watch import Event, Watch, watch_wants


class Store:
    """Objects, their history and the watches on them, under one lock."""

    def __init__(self, history_limit: int) -> None:
        self.history_limit = history_limit
        self.cond = threading.Condition()
        self.objects: dict[str, dict[tuple[str, str], Obj]] = {
            t.plural: {} for t in RESOURCE_TYPES + CUSTOM_RESOURCE_TYPES}
        self.crds: set[str] = set()  # the custom resources (plurals) being served
        self.rv = 100  # like etcd, never "0" (which means "any version" to a watch)
        self.history: deque[Event] = deque()
        self.floor = self.rv  # a watch may start from any resourceVersion >= this
        self.watches: set[Watch] = set()

    def find(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        """The stored object (not a copy); ApiError 404 when there is none."""
        obj = self.objects[rtype.plural].get((namespace, name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{resource_name(rtype)} "{name}" not found')
        return obj

    def create(self, rtype: ResourceType, body: Obj) -> Obj:
        """Store a new object (`generateName` too); 409 when it exists."""
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            raise ApiError(422, "Invalid", "metadata.name: Required value: name is required")
        key = key_of(rtype, body)
        if key in self.objects[rtype.plural]:
            raise ApiError(409, "AlreadyExists",
                           f'{resource_name(rtype)} "{meta["name"]}" already exists')
        body["kind"], body["apiVersion"] = rtype.kind, rtype.api_version
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        return self.commit(rtype, "ADDED", body)

    def update(self, rtype: ResourceType, current: Obj, body: Obj) -> Obj:
        """Replace `current` with `body`; 409 on a stale resourceVersion, nothing on a no-op."""
        meta = body.setdefault("metadata", {})
        wanted_rv = meta.get("resourceVersion") or ""
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on '
                           f'{resource_name(rtype)} "{meta.get("name")}": the object has been '
                           "modified; please apply your changes to the latest version and "
                           "try again")
        for keep in ("uid", "creationTimestamp", "name", "namespace"):
            if keep in current["metadata"]:
                meta[keep] = current["metadata"][keep]
        body["kind"], body["apiVersion"] = rtype.kind, rtype.api_version
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        if body == current:  # a no-op write changes nothing and emits no event
            return copy.deepcopy(current)
        return self.commit(rtype, "MODIFIED", body)

    def delete(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        """Remove an object (a DELETED event); returns it."""
        current = self.find(rtype, namespace, name)
        del self.objects[rtype.plural][(namespace, name)]
        return self.commit(rtype, "DELETED", copy.deepcopy(current), store=False)

    def commit(self, rtype: ResourceType, event_type: str, obj: Obj, store: bool = True) -> Obj:
        """Give `obj` the next resourceVersion, store it and hand the event to the watches."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if store:
            self.objects[rtype.plural][key_of(rtype, obj)] = obj
        event = Event(self.rv, rtype, event_type, obj)
        self.history.append(event)
        while len(self.history) > self.history_limit:
            self.floor = self.history.popleft().rv
        for watch in self.watches:
            if watch_wants(watch, event):
                watch.queue.append(event)
        self.cond.notify_all()
        return copy.deepcopy(obj)

    def list_response(self, rtype: ResourceType, namespace: str | None,
                      query: dict[str, str]) -> Obj:
        """A LIST's answer: the selected objects (a page of them with `limit`), sorted."""
        selectors = (query.get("labelSelector", ""), query.get("fieldSelector", ""))
        store = self.objects[rtype.plural]
        chosen = [store[key] for key in sorted(store)
                  if (namespace is None or key[0] == namespace)
                  and selected(store[key], selectors)]
        metadata = {"resourceVersion": str(self.rv)}
        if query.get("limit"):  # pages: `continue` is "<list's resourceVersion>:<offset>"
            list_rv, start = self.rv, 0
            if query.get("continue"):
                list_rv, start = (int(part) for part in query["continue"].split(":"))
                if list_rv < self.floor:  # compacted away since the first page
                    raise ApiError(410, "Expired", "The provided continue parameter is too old "
                                   "to display a consistent list result. You can start a new "
                                   "list without the continue parameter.")
            end = start + int(query["limit"])
            if end < len(chosen):
                metadata["continue"] = f"{list_rv}:{end}"
                metadata["remainingItemCount"] = len(chosen) - end
            chosen = chosen[start:end]
        items = []
        for obj in chosen:
            item = copy.deepcopy(obj)
            item.pop("kind", None)  # the real API server leaves these out of items
            item.pop("apiVersion", None)
            items.append(item)
        return {"kind": rtype.kind + "List", "apiVersion": rtype.api_version,
                "metadata": metadata, "items": items}

    def patch(self, rtype: ResourceType, namespace: str, name: str, content_type: str,
              patch: object) -> Obj:
        """PATCH an object; a `metadata.resourceVersion` in the result is a precondition."""
        current = self.find(rtype, namespace, name)
        result = patched(current, content_type, patch)
        if not isinstance(result.get("metadata"), dict):
            raise ApiError(422, "Invalid", "metadata: Required value")
        return self.update(rtype, current, result)

    def open_watch(self, rtype: ResourceType, namespace: str | None, query: dict[str, str],
                   conn: socket.socket) -> Watch:
        """Register a watch and queue what it must replay first; raises 410 if too old."""
        rv_text = query.get("resourceVersion", "")
        with self.cond:
            watch = Watch(rtype, namespace,
                          (query.get("labelSelector", ""), query.get("fieldSelector", "")),
                          conn)
            if rv_text in ("", "0"):
                for key in sorted(self.objects[rtype.plural]):
                    event = Event(self.rv, rtype, "ADDED",
                                  self.objects[rtype.plural][key])
                    if watch_wants(watch, event):
                        watch.queue.append(event)
            else:
                start = _parse_rv(rv_text)
                if start < self.floor:
                    raise ApiError(410, "Expired", f"too old resource version: {start} "
                                   f"({self.floor})")
                watch.queue.extend(e for e in self.history
                                   if e.rv > start and watch_wants(watch, e))
            self.watches.add(watch)
            return watch

    def next_watch_batch(self, watch: Watch, wait: float) -> tuple[list[Event], int | None]:
        """Queued events (waiting up to `wait`), or none and the resourceVersion for a
        bookmark: every event up to it has been handed out."""
        with self.cond:
            if not watch.queue and not watch.closed:
                self.cond.wait(wait)
            if watch.closed:
                return [], None
            events = list(watch.queue)
            watch.queue.clear()
            return events, (None if events else self.rv)

    def close_watch(self, watch: Watch) -> None:
        """Forget a watch whose stream ended."""
        with self.cond:
            self.watches.discard(watch)


def _parse_rv(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ApiError(400, "BadRequest", f"invalid resource version {text!r}") from None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
