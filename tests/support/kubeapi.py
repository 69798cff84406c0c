"""A fake Kubernetes API server for tests: real HTTP on 127.0.0.1, objects in memory.

It speaks enough of the API for poolguard's clients (the official `kubernetes` client
pointed at it with a kubeconfig or `Configuration(host=...)`):

- GET list, cluster-wide (`/api/v1/pods`) or namespaced (`/api/v1/namespaces/NS/pods`),
  with `labelSelector` and simple `fieldSelector` (`a.b=v`, `a.b!=v`), paged by `limit` and
  `continue`; items are sorted
  by namespace/name and, like the real server, carry no `kind`/`apiVersion`;
- GET one object; POST create (`generateName` too); PUT update with optimistic
  concurrency (409 on a stale `metadata.resourceVersion`); DELETE;
- PATCH: `application/merge-patch+json`, `application/strategic-merge-patch+json`
  (applied as a merge patch: fine for metadata, lists are replaced) and
  `application/json-patch+json`; a `metadata.resourceVersion` in the patched result is a
  precondition (409 when stale); a patch that changes nothing writes nothing;
- watch (`?watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=N`): a
  chunked stream of JSON lines (ADDED / MODIFIED / DELETED / BOOKMARK); a
  resourceVersion older than the retained history gets a `410 Gone` ERROR event (or
  HTTP 410 with `gone_as_http = True`); no resourceVersion (or "0") starts with
  synthetic ADDED events for the current objects.

The Eviction API (`POST .../pods/NAME/eviction`) with PodDisruptionBudgets (policy/v1):
429 when the pod's budget allows no disruption, 500 when several budgets match.

Resources: pods, nodes, namespaces, events, secrets, configmaps (core/v1), replicasets,
deployments, statefulsets (apps/v1), leases (coordination.k8s.io/v1),
poddisruptionbudgets (policy/v1), mutating- and
validatingwebhookconfigurations (admissionregistration.k8s.io/v1); the custom resources
of the kind registry (leaderworkersets, rollouts, clonesets) only after
`install_crd(kind)` (404 before, and after `remove_crd(kind)`). One global
resourceVersion counter orders every change, as etcd's revision does.

Test hooks: `put` / `modify` / `delete` / `get` / `objects` (changes made while the
server is stopped are kept and replayed), `compact()` (force 410, to watches and to the
`continue` tokens of paged lists begun before it), `gone_as_http`,
`drop_watches()` / `open_watches()`, `stop()` / `start()` / `restart()` (same port,
state kept), `fail()` and `slow()` (for `seconds` or `count` requests, optionally only
one method or path), `clear_faults()`, the request log (`writes()` / `write_count()` by
verb, path and user agent, `watch_count()`, `reset_log()`), `write_kubeconfig()`, and
`wait_until()` for polling with a timeout instead of sleeping.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import socket
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from webhook.core.kinds.registry import WORKLOADS
from webhook.core.objects.selectors import selector_matches

Obj = dict[str, Any]
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class ResourceType:
    plural: str
    kind: str
    api_version: str  # "v1" or "group/version"
    namespaced: bool


RESOURCE_TYPES = (
    ResourceType("pods", "Pod", "v1", True),
    ResourceType("nodes", "Node", "v1", False),
    ResourceType("namespaces", "Namespace", "v1", False),
    ResourceType("events", "Event", "v1", True),
    ResourceType("replicasets", "ReplicaSet", "apps/v1", True),
    ResourceType("deployments", "Deployment", "apps/v1", True),
    ResourceType("statefulsets", "StatefulSet", "apps/v1", True),
    ResourceType("leases", "Lease", "coordination.k8s.io/v1", True),
    ResourceType("secrets", "Secret", "v1", True),
    ResourceType("configmaps", "ConfigMap", "v1", True),
    ResourceType("poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", True),
    ResourceType("mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
                 "admissionregistration.k8s.io/v1", False),
    ResourceType("validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
                 "admissionregistration.k8s.io/v1", False),
)
# Custom resources: served only while their CRD is installed (`install_crd`), as the real
# server answers 404 for a group/version nobody registered.
# Every custom resource of the kind registry.
CUSTOM_RESOURCE_TYPES = tuple(
    ResourceType(r.name, r.kind, r.api_version, r.namespaced) for r in WORKLOADS if r.optional)
_BY_PATH = {(t.api_version, t.plural): t for t in RESOURCE_TYPES + CUSTOM_RESOURCE_TYPES}
_BY_KIND = {t.kind: t for t in RESOURCE_TYPES + CUSTOM_RESOURCE_TYPES}


def resource_type(kind: str) -> ResourceType:
    """The resource type of `kind` (KeyError for kinds the fake does not serve)."""
    return _BY_KIND[kind]


class ApiError(Exception):
    """An error answered as a Kubernetes Status object."""

    def __init__(self, code: int, reason: str, message: str,
                 causes: list[Obj] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.causes = causes

    def status(self) -> Obj:
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": self.message, "reason": self.reason, "code": self.code}
        if self.causes:
            status["details"] = {"causes": self.causes}
        return status


@dataclass
class Request:
    """One request as the server saw it (the log tests count writes from)."""

    method: str
    path: str
    query: dict[str, str]
    user_agent: str
    at: float
    status: int = 0


@dataclass
class _Fault:
    status: int | None
    delay: float
    until: float | None
    remaining: int | None
    match: Callable[[str, str], bool]

    def active(self, now: float) -> bool:
        return ((self.until is None or now < self.until)
                and (self.remaining is None or self.remaining > 0))


@dataclass
class _Event:
    rv: int
    rtype: ResourceType
    type: str
    obj: Obj


@dataclass(eq=False)
class _Watch:
    rtype: ResourceType
    namespace: str | None
    selectors: tuple[str, str]
    conn: socket.socket
    queue: deque[_Event] = field(default_factory=deque)
    closed: bool = False


@dataclass(frozen=True)
class _Target:
    rtype: ResourceType
    namespace: str | None  # None: all namespaces (lists and watches only)
    name: str | None
    subresource: str | None = None  # only pods' `eviction`


class FakeKubeAPI:
    """The server. Use as a context manager or call start()/stop()."""

    def __init__(self, port: int = 0, history_limit: int = 10_000,
                 bookmark_interval: float = 0.5) -> None:
        self.port = port
        self.history_limit = history_limit
        self.bookmark_interval = bookmark_interval
        self.gone_as_http = False
        self.requests: list[Request] = []
        self._cond = threading.Condition()
        self._store: dict[str, dict[tuple[str, str], Obj]] = {
            t.plural: {} for t in RESOURCE_TYPES + CUSTOM_RESOURCE_TYPES}
        self._crds: set[str] = set()  # the custom resources (plurals) being served
        self._rv = 100  # like etcd, never "0" (which means "any version" to a watch)
        self._history: deque[_Event] = deque()
        self._floor = self._rv  # a watch may start from any resourceVersion >= this
        self._watches: set[_Watch] = set()
        self._faults: list[_Fault] = []
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> FakeKubeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> FakeKubeAPI:
        """Listen on 127.0.0.1 (port 0 the first time picks a free port, then it is kept)."""
        server = _Server(("127.0.0.1", self.port), _Handler)
        server.api = self
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake-kube-api",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection (an API server going away)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._cond:
            for watch in self._watches:
                watch.closed = True
            connections = list(self._connections)
            self._cond.notify_all()
        for conn in connections:
            _hard_close(conn)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def restart(self, downtime: float = 0.0) -> None:
        """Stop, stay down for `downtime` seconds, start on the same port; state is kept."""
        self.stop()
        time.sleep(downtime)
        self.start()

    def write_kubeconfig(self, path: str | Path, context: str = "fake") -> Path:
        """A kubeconfig whose current context points at this server; returns its path."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "fake-token"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        }
        Path(path).write_text(json.dumps(config, indent=2), encoding="utf-8")
        return Path(path)

    # ----- objects ---------------------------------------------------------------------

    def put(self, *objects: Mapping[str, Any]) -> list[Obj]:
        """Create or replace objects (ADDED or MODIFIED events); returns the stored copies."""
        stored = []
        with self._cond:
            for obj in objects:
                rtype = resource_type(obj["kind"])
                body = copy.deepcopy(dict(obj))
                key = _key(rtype, body)
                current = self._store[rtype.plural].get(key)
                if current is None:
                    stored.append(self._create(rtype, body))
                else:
                    body["metadata"]["resourceVersion"] = ""
                    stored.append(self._update(rtype, current, body))
        return stored

    def modify(self, kind: str, namespace: str, name: str,
               change: Callable[[Obj], None]) -> Obj:
        """Apply `change` to a copy of the object and store it (a MODIFIED event)."""
        with self._cond:
            rtype = resource_type(kind)
            current = self._find(rtype, namespace, name)
            body = copy.deepcopy(current)
            change(body)
            body["metadata"]["resourceVersion"] = ""
            return self._update(rtype, current, body)

    def delete(self, kind: str, namespace: str, name: str) -> Obj:
        """Delete an object (a DELETED event)."""
        with self._cond:
            return self._delete(resource_type(kind), namespace, name)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A copy of the stored object, or None."""
        with self._cond:
            obj = self._store[resource_type(kind).plural].get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def objects(self, kind: str) -> list[Obj]:
        """Copies of every stored object of `kind`, sorted by namespace/name."""
        with self._cond:
            store = self._store[resource_type(kind).plural]
            return [copy.deepcopy(store[key]) for key in sorted(store)]

    def install_crd(self, kind: str) -> None:
        """Serve the custom resource `kind` (LeaderWorkerSet, Rollout) from now on."""
        with self._cond:
            self._crds.add(resource_type(kind).plural)

    def remove_crd(self, kind: str) -> None:
        """Stop serving `kind`: its objects go and its watches end, as a CRD's deletion."""
        rtype = resource_type(kind)
        with self._cond:
            self._crds.discard(rtype.plural)
            self._store[rtype.plural].clear()
            for watch in self._watches:
                if watch.rtype == rtype:
                    watch.closed = True
            self._cond.notify_all()

    def served(self, rtype: ResourceType) -> bool:
        """Whether requests for `rtype` are answered (custom resources: CRD installed)."""
        return rtype not in CUSTOM_RESOURCE_TYPES or rtype.plural in self._crds

    @property
    def resource_version(self) -> int:
        return self._rv

    # ----- faults and watches ----------------------------------------------------------

    def compact(self) -> None:
        """Forget the event history: watches from any older resourceVersion get 410 Gone."""
        with self._cond:
            self._history.clear()
            self._floor = self._rv

    def drop_watches(self) -> int:
        """Cut every open watch connection mid-stream; returns how many were cut."""
        with self._cond:
            watches = list(self._watches)
            for watch in watches:
                watch.closed = True
            self._cond.notify_all()
        for watch in watches:
            _hard_close(watch.conn)
        return len(watches)

    def open_watches(self) -> int:
        with self._cond:
            return len(self._watches)

    def fail(self, status: int = 503, *, seconds: float | None = None,
             count: int | None = None, method: str | None = None,
             path_contains: str | None = None) -> None:
        """Answer matching requests with `status` for `seconds` or `count` requests."""
        self._add_fault(status, 0.0, seconds, count, method, path_contains)

    def slow(self, delay: float, *, seconds: float | None = None, count: int | None = None,
             method: str | None = None, path_contains: str | None = None) -> None:
        """Delay matching requests by `delay` seconds before they are served."""
        self._add_fault(None, delay, seconds, count, method, path_contains)

    def clear_faults(self) -> None:
        with self._cond:
            self._faults.clear()

    def _add_fault(self, status: int | None, delay: float, seconds: float | None,
                   count: int | None, method: str | None, path_contains: str | None) -> None:
        def match(verb: str, path: str) -> bool:
            return ((method is None or verb == method)
                    and (path_contains is None or path_contains in path))

        until = None if seconds is None else time.monotonic() + seconds
        with self._cond:
            self._faults.append(_Fault(status, delay, until, count, match))

    # ----- request log -----------------------------------------------------------------

    def writes(self, verb: str | None = None, path_contains: str = "",
               user_agent: str | None = None) -> list[Request]:
        """Write requests (POST/PUT/PATCH/DELETE) received, optionally filtered."""
        with self._cond:
            log = list(self.requests)
        return [r for r in log if r.method in WRITE_VERBS
                and (verb is None or r.method == verb) and path_contains in r.path
                and (user_agent is None or r.user_agent == user_agent)]

    def write_count(self, verb: str | None = None, path_contains: str = "") -> int:
        """How many write requests matched (failed ones included: the client sent them)."""
        return len(self.writes(verb, path_contains))

    def watch_count(self, path_contains: str = "") -> int:
        """How many watch requests were received."""
        with self._cond:
            return sum(1 for r in self.requests if r.method == "GET"
                       and "watch" in r.query and path_contains in r.path)

    def reset_log(self) -> None:
        with self._cond:
            self.requests.clear()

    # ----- storage (call with the lock held) -------------------------------------------

    def _find(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        obj = self._store[rtype.plural].get((namespace, name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{_resource_name(rtype)} "{name}" not found')
        return obj

    def _create(self, rtype: ResourceType, body: Obj) -> Obj:
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            raise ApiError(422, "Invalid", "metadata.name: Required value: name is required")
        key = _key(rtype, body)
        if key in self._store[rtype.plural]:
            raise ApiError(409, "AlreadyExists",
                           f'{_resource_name(rtype)} "{meta["name"]}" already exists')
        body["kind"], body["apiVersion"] = rtype.kind, rtype.api_version
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        return self._commit(rtype, "ADDED", body)

    def _update(self, rtype: ResourceType, current: Obj, body: Obj) -> Obj:
        meta = body.setdefault("metadata", {})
        wanted_rv = meta.get("resourceVersion") or ""
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on '
                           f'{_resource_name(rtype)} "{meta.get("name")}": the object has been '
                           "modified; please apply your changes to the latest version and "
                           "try again")
        for keep in ("uid", "creationTimestamp", "name", "namespace"):
            if keep in current["metadata"]:
                meta[keep] = current["metadata"][keep]
        body["kind"], body["apiVersion"] = rtype.kind, rtype.api_version
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        if body == current:  # a no-op write changes nothing and emits no event
            return copy.deepcopy(current)
        return self._commit(rtype, "MODIFIED", body)

    def _evict(self, namespace: str, name: str) -> Obj:
        """The Eviction API (pkg/registry/core/pod/storage/eviction.go): the pod's one
        PodDisruptionBudget decides (429 with a DisruptionBudget cause when it allows no
        disruption; 500 when several match), and an allowed eviction spends one of its
        `status.disruptionsAllowed` and deletes the pod."""
        pod = self._find(resource_type("Pod"), namespace, name)
        labels = pod["metadata"].get("labels") or {}
        budgets = [pdb for (ns, _), pdb in sorted(self._store["poddisruptionbudgets"].items())
                   if ns == namespace and (pdb.get("spec") or {}).get("selector")
                   and selector_matches(pdb["spec"]["selector"], labels)]
        if len(budgets) > 1:
            raise ApiError(500, "InternalError", "This pod has more than one "
                           "PodDisruptionBudget, which the eviction subresource does not "
                           "support.")
        if budgets:
            budget = copy.deepcopy(budgets[0])
            status = budget.setdefault("status", {})
            if int(status.get("disruptionsAllowed") or 0) < 1:
                raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate "
                               "the pod's disruption budget.", causes=[{
                                   "reason": "DisruptionBudget",
                                   "message": f"The disruption budget "
                                   f"{budget['metadata']['name']} needs more healthy pods"}])
            status["disruptionsAllowed"] = int(status["disruptionsAllowed"]) - 1
            self._commit(resource_type("PodDisruptionBudget"), "MODIFIED", budget)
        self._delete(resource_type("Pod"), namespace, name)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}

    def _delete(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        current = self._find(rtype, namespace, name)
        del self._store[rtype.plural][(namespace, name)]
        return self._commit(rtype, "DELETED", copy.deepcopy(current), store=False)

    def _commit(self, rtype: ResourceType, event_type: str, obj: Obj, store: bool = True) -> Obj:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        if store:
            self._store[rtype.plural][_key(rtype, obj)] = obj
        event = _Event(self._rv, rtype, event_type, obj)
        self._history.append(event)
        while len(self._history) > self.history_limit:
            self._floor = self._history.popleft().rv
        for watch in self._watches:
            if _watch_wants(watch, event):
                watch.queue.append(event)
        self._cond.notify_all()
        return copy.deepcopy(obj)

    # ----- request handling ------------------------------------------------------------

    def handle(self, method: str, target: _Target, query: dict[str, str],
               headers: Mapping[str, str], body: bytes) -> tuple[int, Obj]:
        """Serve one non-watch request; returns (status, JSON body)."""
        with self._cond:
            if target.subresource == "eviction":
                if method != "POST":
                    raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")
                return 201, self._evict(target.namespace or "", target.name or "")
            if method == "GET":
                if target.name is None:
                    return 200, self._list(target, query)
                return 200, copy.deepcopy(self._find(target.rtype, target.namespace or "",
                                                     target.name))
            if method == "POST" and target.name is None:
                return 201, self._create(target.rtype, _with_namespace(_json(body), target))
            if target.name is None:
                raise ApiError(405, "MethodNotAllowed", f"{method} needs an object name")
            if method == "PUT":
                current = self._find(target.rtype, target.namespace or "", target.name)
                return 200, self._update(target.rtype, current,
                                         _with_namespace(_json(body), target))
            if method == "PATCH":
                return 200, self._patch(target, headers.get("Content-Type", ""), body)
            if method == "DELETE":
                return 200, self._delete(target.rtype, target.namespace or "", target.name)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")

    def _list(self, target: _Target, query: dict[str, str]) -> Obj:
        selectors = (query.get("labelSelector", ""), query.get("fieldSelector", ""))
        store = self._store[target.rtype.plural]
        chosen = [store[key] for key in sorted(store)
                  if (target.namespace is None or key[0] == target.namespace)
                  and _selected(store[key], selectors)]
        metadata = {"resourceVersion": str(self._rv)}
        if query.get("limit"):  # pages: `continue` is "<list's resourceVersion>:<offset>"
            list_rv, start = self._rv, 0
            if query.get("continue"):
                list_rv, start = (int(part) for part in query["continue"].split(":"))
                if list_rv < self._floor:  # compacted away since the first page
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
        return {"kind": target.rtype.kind + "List", "apiVersion": target.rtype.api_version,
                "metadata": metadata, "items": items}

    def _patch(self, target: _Target, content_type: str, body: bytes) -> Obj:
        current = self._find(target.rtype, target.namespace or "", target.name or "")
        patch = _json(body, allow_list=True)
        kind = content_type.split(";")[0].strip()
        if kind in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if not isinstance(patch, dict):
                raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
            patched = merge_patch(current, patch)
        elif kind == "application/json-patch+json":
            patched = _json_patch(current, patch)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an "
                           f"unknown format - accepted media types include: "
                           f"application/json-patch+json, application/merge-patch+json "
                           f"(got {kind!r})")
        if not isinstance(patched.get("metadata"), dict):
            raise ApiError(422, "Invalid", "metadata: Required value")
        return self._update(target.rtype, current, patched)

    def open_watch(self, target: _Target, query: dict[str, str], conn: socket.socket) -> _Watch:
        """Register a watch and queue what it must replay first; raises 410 if too old."""
        rv_text = query.get("resourceVersion", "")
        with self._cond:
            watch = _Watch(target.rtype, target.namespace,
                           (query.get("labelSelector", ""), query.get("fieldSelector", "")),
                           conn)
            if rv_text in ("", "0"):
                for key in sorted(self._store[target.rtype.plural]):
                    event = _Event(self._rv, target.rtype, "ADDED",
                                   self._store[target.rtype.plural][key])
                    if _watch_wants(watch, event):
                        watch.queue.append(event)
            else:
                start = _parse_rv(rv_text)
                if start < self._floor:
                    raise ApiError(410, "Expired", f"too old resource version: {start} "
                                   f"({self._floor})")
                watch.queue.extend(e for e in self._history
                                   if e.rv > start and _watch_wants(watch, e))
            self._watches.add(watch)
            return watch

    def next_watch_batch(self, watch: _Watch, wait: float) -> tuple[list[_Event], int | None]:
        """Queued events (waiting up to `wait`), or none and the resourceVersion for a
        bookmark: every event up to it has been handed out."""
        with self._cond:
            if not watch.queue and not watch.closed:
                self._cond.wait(wait)
            if watch.closed:
                return [], None
            events = list(watch.queue)
            watch.queue.clear()
            return events, (None if events else self._rv)

    def close_watch(self, watch: _Watch) -> None:
        with self._cond:
            self._watches.discard(watch)

    def fault_for(self, method: str, path: str) -> tuple[int | None, float]:
        """The (status, delay) a matching active fault imposes on this request."""
        now = time.monotonic()
        with self._cond:
            for fault in self._faults:
                if fault.active(now) and fault.match(method, path):
                    if fault.remaining is not None:
                        fault.remaining -= 1
                    return fault.status, fault.delay
        return None, 0.0

    def log_request(self, request: Request) -> None:
        with self._cond:
            self.requests.append(request)

    def track(self, conn: socket.socket, add: bool) -> None:
        with self._cond:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    api: FakeKubeAPI

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients under test hang up on purpose (timeouts, stopped watches); the default
        # prints a BrokenPipeError traceback into the test run's output.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's
        # algorithm and the client's delayed ACK add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.api.track(self.connection, True)

    def finish(self) -> None:
        self.server.api.track(self.connection, False)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep test output quiet

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        api = self.server.api
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Request(method, parts.path, query, self.headers.get("User-Agent", ""),
                          time.monotonic())
        api.log_request(request)
        status, delay = api.fault_for(method, parts.path)
        if delay:
            time.sleep(delay)
        try:
            if status is not None:
                raise ApiError(status, HTTPStatus(status).phrase.replace(" ", ""),
                               f"injected fault: {status}")
            target = _parse_path(parts.path)
            if not api.served(target.rtype):
                raise ApiError(404, "NotFound", "the server could not find the requested "
                               f"resource ({parts.path})")
            if method == "GET" and query.get("watch") in ("1", "true"):
                request.status = 200
                self._watch(api, target, query)
                return
            request.status, answer = api.handle(method, target, query, self.headers, body)
        except ApiError as err:
            request.status, answer = err.code, err.status()
        self._send_json(request.status, answer)

    def _send_json(self, status: int, document: Obj) -> None:
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _watch(self, api: FakeKubeAPI, target: _Target, query: dict[str, str]) -> None:
        try:
            watch = api.open_watch(target, query, self.connection)
        except ApiError as err:
            if api.gone_as_http or err.code != 410:
                self._send_json(err.code, err.status())
                return
            self._start_stream()
            self._chunk({"type": "ERROR", "object": err.status()})
            self._chunk(None)
            return
        try:
            self._start_stream()
            self._stream(api, watch, target.rtype, query)
        except OSError:
            self.close_connection = True
        finally:
            api.close_watch(watch)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _stream(self, api: FakeKubeAPI, watch: _Watch, rtype: ResourceType,
                query: dict[str, str]) -> None:
        timeout = float(query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        last_sent = time.monotonic()
        while time.monotonic() < deadline:
            wait = min(api.bookmark_interval, max(deadline - time.monotonic(), 0.0))
            events, bookmark_rv = api.next_watch_batch(watch, wait)
            if watch.closed:
                self.close_connection = True
                return
            for event in events:
                self._chunk({"type": event.type, "object": event.obj})
                last_sent = time.monotonic()
            if (bookmarks and bookmark_rv is not None
                    and time.monotonic() - last_sent >= api.bookmark_interval):
                self._chunk({"type": "BOOKMARK", "object": {
                    "kind": rtype.kind, "apiVersion": rtype.api_version,
                    "metadata": {"resourceVersion": str(bookmark_rv)}}})
                last_sent = time.monotonic()
        self._chunk(None)

    def _chunk(self, document: Obj | None) -> None:
        if document is None:
            self.wfile.write(b"0\r\n\r\n")
            return
        data = json.dumps(document).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


# ----- helpers ---------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (null deletes a key); returns a new value."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _json_patch(current: Obj, ops: Any) -> Obj:
    import jsonpatch  # a dev dependency, needed only here

    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
    try:
        return jsonpatch.apply_patch(current, ops)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
        raise ApiError(422, "Invalid", f"the JSON patch could not be applied: {err}") from None


def _parse_path(path: str) -> _Target:
    segments = [unquote(s) for s in path.strip("/").split("/")]
    if segments[:2] == ["api", "v1"]:
        group_version, rest = "v1", segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 3:
        group_version, rest = f"{segments[1]}/{segments[2]}", segments[3:]
    else:
        raise ApiError(404, "NotFound", f"the server could not find the requested resource "
                       f"({path})")
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    rtype = _BY_PATH.get((group_version, rest[0] if rest else ""))
    subresource = None
    if rtype is not None and rtype.plural == "pods" and len(rest) == 3 \
            and rest[2] == "eviction" and namespace is not None:
        subresource, rest = "eviction", rest[:2]
    if rtype is None or len(rest) > 2 or (namespace is not None and not rtype.namespaced):
        raise ApiError(404, "NotFound", f"the server could not find the requested resource "
                       f"({path})")
    name = rest[1] if len(rest) == 2 else None
    if name is not None and rtype.namespaced and namespace is None:
        raise ApiError(404, "NotFound", f"{rtype.plural} needs a namespace ({path})")
    return _Target(rtype, namespace if rtype.namespaced else ("" if name else None), name,
                   subresource)


def _with_namespace(body: Any, target: _Target) -> Obj:
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "the request body must be a JSON object")
    meta = body.setdefault("metadata", {})
    if target.rtype.namespaced:
        if meta.get("namespace") not in (None, "", target.namespace):
            raise ApiError(400, "BadRequest", "the namespace of the object does not match the "
                           "namespace on the request")
        meta["namespace"] = target.namespace
    if target.name is not None and meta.get("name") not in (None, target.name):
        raise ApiError(400, "BadRequest", "the name of the object does not match the name on "
                       "the URL")
    return body


def _json(body: bytes, allow_list: bool = False) -> Any:
    try:
        value = json.loads(body or b"null")
    except ValueError as err:
        raise ApiError(400, "BadRequest", f"invalid JSON: {err}") from None
    if not isinstance(value, dict) and not (allow_list and isinstance(value, list)):
        raise ApiError(400, "BadRequest", "the request body must be a JSON object")
    return value


def _key(rtype: ResourceType, obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    namespace = (meta.get("namespace") or "default") if rtype.namespaced else ""
    if rtype.namespaced:
        obj["metadata"]["namespace"] = namespace  # type: ignore[index]
    return namespace, meta.get("name") or ""


def _resource_name(rtype: ResourceType) -> str:
    group = rtype.api_version.rpartition("/")[0]
    return f"{rtype.plural}.{group}" if group else rtype.plural


def _parse_rv(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ApiError(400, "BadRequest", f"invalid resource version {text!r}") from None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _hard_close(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


def _watch_wants(watch: _Watch, event: _Event) -> bool:
    if event.rtype is not watch.rtype:
        return False
    namespace = (event.obj.get("metadata") or {}).get("namespace", "")
    if watch.namespace is not None and namespace != watch.namespace:
        return False
    return _selected(event.obj, watch.selectors)


def _selected(obj: Mapping[str, Any], selectors: tuple[str, str]) -> bool:
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
