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
verb, path and user agent, `watch_count()`, `reset_log()`) and `write_kubeconfig()`;
kubeapi.helpers has `items_of()` and `wait_until()` for polling with a timeout instead
of sleeping.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .errors import ApiError
from .eviction import evict
from .faults import Fault
from .handler import Handler, HTTPServer, Target, hard_close, json_body, with_namespace
from .request_log import WRITE_VERBS, Request
from .resources import CUSTOM_RESOURCE_TYPES, Obj, ResourceType, key_of, resource_type
from .store import Store


class FakeKubeAPI:
    """The server. Use as a context manager or call start()/stop()."""

    def __init__(self, port: int = 0, history_limit: int = 10_000,
                 bookmark_interval: float = 0.5) -> None:
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.gone_as_http = False
        self.requests: list[Request] = []
        self.store = Store(history_limit)
        self._cond = self.store.cond  # one lock for the objects, faults and the request log
        self._faults: list[Fault] = []
        self._connections: set[socket.socket] = set()
        self._server: HTTPServer | None = None
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
        server = HTTPServer(("127.0.0.1", self.port), Handler)
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
            for watch in self.store.watches:
                watch.closed = True
            connections = list(self._connections)
            self._cond.notify_all()
        for conn in connections:
            hard_close(conn)
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
                key = key_of(rtype, body)
                current = self.store.objects[rtype.plural].get(key)
                if current is None:
                    stored.append(self.store.create(rtype, body))
                else:
                    body["metadata"]["resourceVersion"] = ""
                    stored.append(self.store.update(rtype, current, body))
        return stored

    def modify(self, kind: str, namespace: str, name: str,
               change: Callable[[Obj], None]) -> Obj:
        """Apply `change` to a copy of the object and store it (a MODIFIED event)."""
        with self._cond:
            rtype = resource_type(kind)
            current = self.store.find(rtype, namespace, name)
            body = copy.deepcopy(current)
            change(body)
            body["metadata"]["resourceVersion"] = ""
            return self.store.update(rtype, current, body)

    def delete(self, kind: str, namespace: str, name: str) -> Obj:
        """Delete an object (a DELETED event)."""
        with self._cond:
            return self.store.delete(resource_type(kind), namespace, name)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A copy of the stored object, or None."""
        with self._cond:
            obj = self.store.objects[resource_type(kind).plural].get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def objects(self, kind: str) -> list[Obj]:
        """Copies of every stored object of `kind`, sorted by namespace/name."""
        with self._cond:
            store = self.store.objects[resource_type(kind).plural]
            return [copy.deepcopy(store[key]) for key in sorted(store)]

    def install_crd(self, kind: str) -> None:
        """Serve the custom resource `kind` (LeaderWorkerSet, Rollout) from now on."""
        with self._cond:
            self.store.crds.add(resource_type(kind).plural)

    def remove_crd(self, kind: str) -> None:
        """Stop serving `kind`: its objects go and its watches end, as a CRD's deletion."""
        rtype = resource_type(kind)
        with self._cond:
            self.store.crds.discard(rtype.plural)
            self.store.objects[rtype.plural].clear()
            for watch in self.store.watches:
                if watch.rtype == rtype:
                    watch.closed = True
            self._cond.notify_all()

    def served(self, rtype: ResourceType) -> bool:
        """Whether requests for `rtype` are answered (custom resources: CRD installed)."""
        return rtype not in CUSTOM_RESOURCE_TYPES or rtype.plural in self.store.crds

    @property
    def resource_version(self) -> int:
        return self.store.rv

    # ----- faults and watches ----------------------------------------------------------

    def compact(self) -> None:
        """Forget the event history: watches from any older resourceVersion get 410 Gone."""
        with self._cond:
            self.store.history.clear()
            self.store.floor = self.store.rv

    def drop_watches(self) -> int:
        """Cut every open watch connection mid-stream; returns how many were cut."""
        with self._cond:
            watches = list(self.store.watches)
            for watch in watches:
                watch.closed = True
            self._cond.notify_all()
        for watch in watches:
            hard_close(watch.conn)
        return len(watches)

    def open_watches(self) -> int:
        with self._cond:
            return len(self.store.watches)

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
            self._faults.append(Fault(status, delay, until, count, match))

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

    # ----- request handling ------------------------------------------------------------

    def handle(self, method: str, target: Target, query: dict[str, str],
               headers: Mapping[str, str], body: bytes) -> tuple[int, Obj]:
        """Serve one non-watch request; returns (status, JSON body)."""
        with self._cond:
            if target.subresource == "eviction":
                if method != "POST":
                    raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")
                return 201, evict(self.store, target.namespace or "", target.name or "")
            if method == "GET":
                if target.name is None:
                    return 200, self.store.list_response(target.rtype, target.namespace, query)
                return 200, copy.deepcopy(self.store.find(target.rtype, target.namespace or "",
                                                     target.name))
            if method == "POST" and target.name is None:
                return 201, self.store.create(target.rtype,
                                              with_namespace(json_body(body), target))
            if target.name is None:
                raise ApiError(405, "MethodNotAllowed", f"{method} needs an object name")
            if method == "PUT":
                current = self.store.find(target.rtype, target.namespace or "", target.name)
                return 200, self.store.update(target.rtype, current,
                                         with_namespace(json_body(body), target))
            if method == "PATCH":
                self.store.find(target.rtype, target.namespace or "", target.name)  # 404 first
                return 200, self.store.patch(target.rtype, target.namespace or "", target.name,
                                             headers.get("Content-Type", ""),
                                             json_body(body, allow_list=True))
            if method == "DELETE":
                return 200, self.store.delete(target.rtype, target.namespace or "", target.name)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")

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
