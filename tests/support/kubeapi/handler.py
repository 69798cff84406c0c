"""The fake API server's HTTP side: request paths parsed into resources, JSON answers,
watches streamed as chunked JSON lines with bookmarks."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from .errors import ApiError
from .request_log import Request
from .resources import BY_PATH, Obj, ResourceType
from .store import Store
from .watch import Watch


@dataclass(frozen=True)
class Target:
    """What a request's path names."""

    rtype: ResourceType
    namespace: str | None  # None: all namespaces (lists and watches only)
    name: str | None
    subresource: str | None = None  # only pods' `eviction`



class Api(Protocol):
    """What the HTTP side asks of the server (kubeapi.server.FakeKubeAPI)."""

    store: Store
    bookmark_interval: float
    gone_as_http: bool

    def track(self, conn: socket.socket, add: bool) -> None:
        """Remember (or forget) an open connection, to cut it on stop()."""
        ...

    def log_request(self, request: Request) -> None:
        """Add a request to the log."""
        ...

    def fault_for(self, method: str, path: str) -> tuple[int | None, float]:
        """The (status, delay) an injected fault imposes on this request."""
        ...

    def served(self, rtype: ResourceType) -> bool:
        """Whether requests for `rtype` are answered."""
        ...

    def handle(self, method: str, target: Target, query: dict[str, str],
               headers: Mapping[str, str], body: bytes) -> tuple[int, Obj]:
        """Serve one non-watch request; returns (status, JSON body)."""
        ...


class HTTPServer(ThreadingHTTPServer):
    """The listening socket, one thread per connection."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    api: Api

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients under test hang up on purpose (timeouts, stopped watches); the default
        # prints a BrokenPipeError traceback into the test run's output.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    """One connection: requests answered by the server (an Api)."""

    protocol_version = "HTTP/1.1"
    server: HTTPServer

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
            target = parse_path(parts.path)
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

    def _watch(self, api: Api, target: Target, query: dict[str, str]) -> None:
        try:
            watch = api.store.open_watch(target.rtype, target.namespace, query,
                                         self.connection)
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
            api.store.close_watch(watch)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _stream(self, api: Api, watch: Watch, rtype: ResourceType,
                query: dict[str, str]) -> None:
        timeout = float(query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        last_sent = time.monotonic()
        while time.monotonic() < deadline:
            wait = min(api.bookmark_interval, max(deadline - time.monotonic(), 0.0))
            events, bookmark_rv = api.store.next_watch_batch(watch, wait)
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



def parse_path(path: str) -> Target:
    """The resource, namespace, name and subresource of a path; ApiError 404 otherwise."""
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
    rtype = BY_PATH.get((group_version, rest[0] if rest else ""))
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
    return Target(rtype, namespace if rtype.namespaced else ("" if name else None), name,
                   subresource)


def with_namespace(body: Any, target: Target) -> Obj:
    """The body with the path's namespace set; 400 when it names another one."""
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


def json_body(body: bytes, allow_list: bool = False) -> Any:
    """The decoded request body: an object (or a list); 400 otherwise."""
    try:
        value = json.loads(body or b"null")
    except ValueError as err:
        raise ApiError(400, "BadRequest", f"invalid JSON: {err}") from None
    if not isinstance(value, dict) and not (allow_list and isinstance(value, list)):
        raise ApiError(400, "BadRequest", "the request body must be a JSON object")
    return value



def hard_close(conn: socket.socket) -> None:
    """Cut a connection under whoever is reading it."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)

