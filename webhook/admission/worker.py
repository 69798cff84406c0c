"""The gunicorn worker `serve` runs: gevent, with deadlines on every phase a client controls.

One process serves every connection in greenlets, so a connection that sends nothing costs
a socket and a few kilobytes, not a thread. What a client controls is bounded in time:

- the TLS handshake must finish within `HANDSHAKE_SECONDS`;
- once the first byte of a request has arrived, its request line and headers must arrive
  within `HEAD_SECONDS`, and its body within `BODY_SECONDS`;
- a connection may sit idle before its first request and between requests for
  `IDLE_SECONDS` (longer than client-go's 90 s, so the API server, not poolguard, closes
  idle connections). Go's transport parks a connection it dialled for a request that
  another connection served; closing it early made the API server's next POST on it fail
  (`broken pipe`, not retried: the webhook call fails open), as `make bench-scale` showed.
  An idle TLS connection costs the same whether it has served a request or not.

The body is read here, before the app runs, so a slow or broken body never reaches Flask:
malformed chunked framing gets a 400, a body over the limit a 413, a body too slow a 408,
a client gone mid-body a closed connection, and none of them a traceback. Bodies over
`SMALL_BODY_BYTES` are read and answered at most `LARGE_BODY_SLOTS` at a time, which bounds
the memory a burst of large hostile bodies can take.

gevent patches the standard library when the worker starts, after the fork: the TLS
context is therefore built again in the worker (a context made by the unpatched `ssl`
module cannot wrap gevent's sockets).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import ssl
import sys
import time
import warnings
from datetime import datetime
from functools import partial
from typing import Any

import gevent
from gevent import monkey
from gevent.lock import BoundedSemaphore
from gevent.pool import Pool
from gevent.server import StreamServer
from gunicorn import util
from gunicorn.http import errors as http_errors
from gunicorn.http import wsgi
from gunicorn.http.body import ChunkedReader, LengthReader
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from gunicorn.workers.ggevent import GeventWorker

from .app import CLIENT_CERT_KEY

HANDSHAKE_SECONDS = 5.0
HEAD_SECONDS = 5.0
BODY_SECONDS = 5.0
IDLE_SECONDS = 120.0
MAX_BODY_BYTES = 3 * 1024 * 1024  # the API server's own request limit is 3 MiB
DRAIN_LIMIT = 16 * 1024 * 1024  # read (and drop) this much of a too-large body so the
# client sees the 413 instead of a reset connection; past it, the connection is dropped
SMALL_BODY_BYTES = 64 * 1024  # a pod review is 3-20 KiB
LARGE_BODY_SLOTS = 4

FRAMING_ERRORS = (http_errors.InvalidChunkSize, http_errors.ChunkMissingTerminator,
                  http_errors.InvalidChunkExtension, http_errors.LimitRequestHeaders,
                  http_errors.InvalidHeader)
# Request-line and header errors gunicorn answers itself, with a 4xx.
HEAD_ERRORS = (http_errors.ParseException, http_errors.LimitRequestLine,
               http_errors.LimitRequestHeaders)


class Deadline(Exception):
    """A client took longer than its deadline for one phase of a request."""

    def __init__(self, phase: str) -> None:
        super().__init__(phase)
        self.phase = phase


class PlainConfig:
    """gunicorn's settings as plain attributes, for the per-request code.

    gunicorn's `Config` resolves every attribute through `__getattr__` and `Setting.get`;
    its parser, environ and response read about 17 of them per request. The worker's
    settings do not change after it starts, so they are read once here (properties and
    methods of `Config` on first use).
    """

    def __init__(self, cfg: Any) -> None:
        self.__dict__["_cfg"] = cfg
        for name in cfg.settings:
            self.__dict__[name] = getattr(cfg, name)  # Config's properties win, as there

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.__dict__["_cfg"], name)
        self.__dict__[name] = value
        return value


class AdmissionRequest(Request):
    """gunicorn's request, trusting no forwarding headers from any peer.

    The API server calls the webhook directly, never through a proxy, so neither
    `X-Forwarded-*` headers nor the peer-address check behind them (an IP parse per
    request) have a use here.
    """

    def _peer_trusted_for_forwarded(self) -> tuple[dict, list]:
        return {}, []


class AdmissionParser(RequestParser):
    """gunicorn's HTTP/1.1 request parser (its C parser when installed), for our requests."""

    mesg_class = AdmissionRequest

    def finish_body(self, deadline: float | None = None, max_bytes: int | None = None) -> bool:
        """Nothing is left to drain: the worker reads every body whole before the app runs
        (or closes the connection), so gunicorn's drain and its two socket-timeout calls
        per request are skipped."""
        return True


class Deadlines:
    """One connection's timers for the phases a client controls, reused for each request.

    A `gevent.Timeout` used in a `with` block cannot be started again; three new ones per
    request (idle wait, headers, body) cost more than the request's own parsing. So each
    is started before its phase and cancelled after it (`try`/`finally`, not a context
    manager: this runs for every request).
    """

    def __init__(self) -> None:
        self.head = gevent.Timeout(HEAD_SECONDS, Deadline("request headers"))
        self.body = gevent.Timeout(BODY_SECONDS, Deadline("request body"))
        self.idle = gevent.Timeout(IDLE_SECONDS, Deadline("idle"))

    def close(self) -> None:
        for timer in (self.head, self.body, self.idle):
            timer.close()


class QuietResponse(wsgi.Response):
    """gunicorn's response without the `Server:` banner, head and body in one TLS record.

    gunicorn writes the head and the body with two sends: two TLS records, two syscalls
    and two trips through gevent's hub per answer. The head is kept back here and sent
    with the first body bytes (an admission answer is one body piece).
    """

    _head = b""

    def default_headers(self) -> list[str]:
        connection = "upgrade" if self.upgrade else "close" if self.should_close() else "keep-alive"
        major, minor = self.req.version
        lines = [f"HTTP/{major}.{minor} {self.status}\r\n", f"Date: {_http_date()}\r\n",
                 f"Connection: {connection}\r\n"]
        if self.chunked:
            lines.append("Transfer-Encoding: chunked\r\n")
        return lines

    def send_headers(self) -> None:
        if self.headers_sent:
            return
        lines = self.default_headers()
        lines.extend(f"{name}: {value}\r\n" for name, value in self.headers)
        self._head = ("".join(lines) + "\r\n").encode("latin-1")
        self.headers_sent = True
        if self.chunked:
            self._flush_head()

    def _flush_head(self) -> None:
        head, self._head = self._head, b""
        if head:
            send_all(self.sock, head)

    def _emit_body(self, data: bytes) -> None:
        if self._head and not self.chunked:
            head, self._head = self._head, b""
            send_all(self.sock, head + data)
            return
        self._flush_head()
        super()._emit_body(data)

    def close(self) -> None:
        self.send_headers()
        self._flush_head()
        super().close()


def send_all(sock: Any, data: bytes) -> None:
    """`sock.sendall(data)` without gevent's per-call getsockopt (it sizes chunks for large
    payloads; a TLS write takes an answer of a few KiB whole)."""
    view = memoryview(data)
    while view:
        view = view[sock.send(view):]


_date = [0, ""]


def _http_date() -> str:
    """The Date header's value, formatted once a second rather than once a response."""
    now = int(time.time())
    if now != _date[0]:
        _date[:] = [now, util.http_date(now)]
    return _date[1]


def _json_response(status: int, reason: str, message: str, close: bool = True) -> bytes:
    body = json.dumps({"error": message, "code": status}, separators=(",", ":")).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n")
    return head.encode("latin-1") + body


def _use_gevent_ssl_everywhere() -> None:
    """Point names bound to the unpatched `ssl.SSLContext` at gevent's.

    urllib3 (under the Kubernetes client's watches) imports `SSLContext` by name when the
    master starts, before gevent patches `ssl` in the worker; its contexts would then wrap
    gevent sockets with the blocking class (a RecursionError at the first HTTPS call).
    gevent's own modules keep the original: they subclass it.
    """
    original = monkey.get_original("ssl", "SSLContext")
    if original is ssl.SSLContext:
        return  # not patched
    for name, module in list(sys.modules.items()):
        if module is None or name == "ssl" or name.startswith("gevent"):
            continue
        for attribute, value in list(getattr(module, "__dict__", {}).items()):
            if value is original:
                setattr(module, attribute, ssl.SSLContext)


class DeadlineWorker(GeventWorker):
    """gunicorn's gevent worker with TLS done per connection under deadlines."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.large_bodies: BoundedSemaphore | None = None
        self.tls: Any = None
        self.idle: set[gevent.Greenlet] = set()  # connections waiting for a request
        self.plain_cfg: Any = None
        self.environ_base: dict[str, Any] = {}
        self.script_name = ""

    def patch(self) -> None:
        with warnings.catch_warnings():
            # gevent warns that `ssl` was imported before it patched it (the master
            # imported urllib3); `_use_gevent_ssl_everywhere` below is what resolves
            # that, so the warning would only alarm whoever reads the log.
            warnings.simplefilter("ignore", monkey.MonkeyPatchWarning)
            super().patch()
        _use_gevent_ssl_everywhere()
        # Built again now that `ssl` is gevent's: the master's context cannot wrap
        # gevent sockets (TypeError at the first connection).
        self.tls = getattr(self.app, "tls", None)
        if self.tls is not None:
            self.tls.rebuild()
        self.large_bodies = BoundedSemaphore(LARGE_BODY_SLOTS)
        self.plain_cfg = PlainConfig(self.cfg)
        # What every request's environ starts from (gunicorn's own base environ).
        self.environ_base = {**wsgi.base_environ(self.plain_cfg), "wsgi.multithread": True}
        self.script_name = os.environ.get("SCRIPT_NAME", "")

    def run(self) -> None:
        servers = []
        for listener in self.sockets:
            listener.setblocking(1)
            server = StreamServer(listener, handle=partial(self.handle, listener),
                                  spawn=Pool(self.worker_connections))
            server.start()
            servers.append(server)
        while self.alive:
            self.notify()
            gevent.sleep(1.0)
        for server in servers:
            server.close()  # stop accepting; requests in flight get graceful_timeout
        # Idle kept-alive connections close now, so their clients move to other replicas
        # instead of this worker waiting out the graceful timeout for them.
        for greenlet in list(self.idle):
            greenlet.kill(block=False)
        started = time.monotonic()
        while time.monotonic() - started <= self.cfg.graceful_timeout:
            if all(server.pool.free_count() == server.pool.size for server in servers):
                return
            self.notify()
            gevent.sleep(0.2)
        self.log.warning("worker graceful timeout (pid:%s)", self.pid)
        for server in servers:
            server.stop(timeout=1)

    # --- one connection -----------------------------------------------------------------

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        client.setblocking(1)
        conn = client
        try:
            peer = None
            if self.tls is not None:
                conn = self._handshake(client)
                if self.tls.client_ca:
                    peer = conn.getpeercert()  # verified against --client-ca, or None
            self._serve(listener, conn, addr, peer)
        except Deadline as err:
            self.log.debug("closing %s: %s deadline passed", addr, err.phase)
        except (ssl.SSLError, http_errors.NoMoreData, StopIteration):
            pass  # a client that does not speak TLS, or went away
        except OSError as err:
            if err.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, None):
                self.log.warning("socket error from %s: %s", addr, err)
        except gevent.GreenletExit:
            pass
        except Exception:
            self.log.exception("error serving a connection from %s", addr)
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _handshake(self, client: Any) -> Any:
        conn = self.tls.context().wrap_socket(client, server_side=True,
                                              do_handshake_on_connect=False)
        with gevent.Timeout(HANDSHAKE_SECONDS, Deadline("TLS handshake")):
            conn.do_handshake()
        return conn

    def _serve(self, listener: Any, conn: Any, addr: Any, peer: dict | None) -> None:
        parser = AdmissionParser(self.plain_cfg, conn, addr)
        listener_name = listener.getsockname()
        deadlines = Deadlines()
        try:
            while self.alive:
                if not self._wait_for_request(conn, parser, deadlines.idle):
                    return
                deadlines.head.start()
                try:
                    req = next(parser)
                except HEAD_ERRORS as err:
                    self._head_error(conn, err)
                    return
                finally:
                    deadlines.head.cancel()
                if not self._read_body(conn, req, deadlines.body):
                    return
                if not self._respond(listener_name, req, conn, addr, peer):
                    return
                # Let the other connections' ready requests go first: a client that
                # always has its next request waiting must not keep this greenlet to
                # itself.
                gevent.sleep(0)
        finally:
            deadlines.close()

    def _wait_for_request(self, conn: Any, parser: Any, limit: gevent.Timeout) -> bool:
        """Wait until `limit` expires for the next request to start; False if none does.

        The first bytes are read here and handed back to the parser, so the header
        deadline starts with them (an idle kept-alive connection is not a slow one).
        """
        buffered = parser.unreader.buf
        buffered.seek(0, io.SEEK_END)
        if buffered.tell():
            return True
        if not self.alive:
            return False
        current = gevent.getcurrent()
        self.idle.add(current)
        limit.start()
        try:
            data = conn.recv(8192)
        except Deadline:
            return False
        finally:
            limit.cancel()
            self.idle.discard(current)
        if not data:
            return False
        parser.unreader.unread(data)
        return True

    def _head_error(self, conn: Any, err: Exception) -> None:
        status, reason = 400, "Bad Request"
        if isinstance(err, http_errors.LimitRequestLine):
            status, reason = 414, "URI Too Long"
        elif isinstance(err, http_errors.LimitRequestHeaders):
            status, reason = 431, "Request Header Fields Too Large"
        self._send(conn, _json_response(status, reason, f"malformed request: {str(err)[:80]}"))

    def _send(self, conn: Any, data: bytes) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(data)

    # --- the body -----------------------------------------------------------------------

    def _read_body(self, conn: Any, req: Any, deadline: gevent.Timeout) -> bool:
        """Read the whole body under its deadline into memory; False closes the connection."""
        reader = req.body.reader if req.body is not None else None
        if isinstance(reader, LengthReader):
            length: int | None = reader.length
        elif isinstance(reader, ChunkedReader):
            length = None
        else:  # no Content-Length and not chunked: HTTP/1.1 says the body is empty
            req.body = io.BytesIO(b"")
            return True
        if length is not None and length > MAX_BODY_BYTES:
            self._too_large(conn, req, min(length, DRAIN_LIMIT))
            return False
        if req._expected_100_continue:
            self._send(conn, b"HTTP/1.1 100 Continue\r\n\r\n")
            req._expected_100_continue = False
        large = length is None or length > SMALL_BODY_BYTES
        if large and not self.large_bodies.acquire(timeout=BODY_SECONDS):
            self._send(conn, _json_response(503, "Service Unavailable",
                                            "too many large requests at once; retry"))
            return False
        deadline.start()
        try:
            data = req.body.read(MAX_BODY_BYTES + 1)
        except Deadline:
            self._send(conn, _json_response(408, "Request Timeout",
                                            f"request body not received within "
                                            f"{BODY_SECONDS:.0f} s"))
            self._release(large)
            return False
        except FRAMING_ERRORS as err:
            self._send(conn, _json_response(400, "Bad Request",
                                            f"malformed chunked body: {str(err)[:80]}"))
            self._release(large)
            return False
        except (http_errors.NoMoreData, OSError):
            self._release(large)  # the client went away mid-body: nobody to answer
            return False
        except BaseException:
            self._release(large)
            raise
        finally:
            deadline.cancel()
        if len(data) > MAX_BODY_BYTES:
            self._release(large)
            self._too_large(conn, req, DRAIN_LIMIT)
            return False
        if length is not None and len(data) < length:
            self._release(large)  # the client closed before sending all it announced
            return False
        # The app reads the body from memory: a plain BytesIO is a complete wsgi.input.
        req.body = io.BytesIO(data)
        req.poolguard_large = large
        return True

    def _release(self, large: bool) -> None:
        if large:
            self.large_bodies.release()

    def _too_large(self, conn: Any, req: Any, drain: int) -> None:
        try:
            with gevent.Timeout(BODY_SECONDS, Deadline("request body")):
                while drain > 0:
                    chunk = req.body.read(min(drain, 1 << 16))
                    if not chunk:
                        break
                    drain -= len(chunk)
        except (Deadline, OSError, *FRAMING_ERRORS, http_errors.NoMoreData):
            pass
        self._send(conn, _json_response(413, "Payload Too Large",
                                        f"body exceeds the {MAX_BODY_BYTES}-byte limit"))

    # --- the response -------------------------------------------------------------------

    def _environ(self, req: Any, conn: Any, addr: Any, listener_name: Any) -> dict[str, Any]:
        """The WSGI environ of `req`, as gunicorn's `wsgi.create` builds it for this worker's
        one case: HTTP/1.1 on a TCP listener, no proxy protocol, 100-continue already sent
        by `_read_body`. It starts from a per-worker copy of the constant part instead of
        building that (a logger lookup under a lock among it) for every request.
        """
        environ = self.environ_base.copy()
        environ["wsgi.input"] = req.body
        environ["gunicorn.socket"] = conn
        environ["REQUEST_METHOD"] = req.method
        environ["QUERY_STRING"] = req.query
        environ["RAW_URI"] = req.uri
        environ["SERVER_PROTOCOL"] = f"HTTP/{req.version[0]}.{req.version[1]}"
        environ["wsgi.url_scheme"] = req.scheme
        environ["REMOTE_ADDR"], environ["REMOTE_PORT"] = addr[0], str(addr[1])
        environ["SERVER_NAME"] = listener_name[0]
        environ["SERVER_PORT"] = str(listener_name[1])
        repeated: dict[str, list[str]] = {}
        for name, value in req.headers:  # upper-case names, checked by gunicorn's parser
            if name == "CONTENT-TYPE":
                environ["CONTENT_TYPE"] = value
            elif name == "CONTENT-LENGTH":
                environ["CONTENT_LENGTH"] = value
            else:
                key = "HTTP_" + name.replace("-", "_")
                if key in environ:  # a repeated field: joined once, as gunicorn does
                    repeated.setdefault(key, [environ[key]]).append(value)
                else:
                    environ[key] = value
        for key, values in repeated.items():
            environ[key] = ",".join(values)
        path = req.path
        if self.script_name:
            if not path.startswith(self.script_name):
                raise ValueError(f"request path {path!r} does not start with SCRIPT_NAME "
                                 f"{self.script_name!r}")
            path = path[len(self.script_name):]
        environ["PATH_INFO"] = util.unquote_to_wsgi_str(path)
        environ["SCRIPT_NAME"] = self.script_name
        return environ

    def _respond(self, listener_name: Any, req: Any, conn: Any, addr: Any,
                 peer: dict | None) -> bool:
        """Run the app for `req`; False when the connection must close afterwards."""
        logged = self.log.access_log_enabled
        started = datetime.now() if logged else None
        environ: dict[str, Any] = {}
        resp = None
        try:
            resp = QuietResponse(req, conn, self.plain_cfg)
            environ = self._environ(req, conn, addr, listener_name)
            if peer:
                environ[CLIENT_CERT_KEY] = peer
            self.nr += 1
            if self.nr >= self.max_requests and self.alive:
                self.log.info("autorestarting worker after current request")
                self.alive = False
            if not self.alive:
                resp.force_close()
            respiter = self.wsgi(environ, resp.start_response)
            try:
                for item in respiter:
                    resp.write(item)
                resp.close()
            finally:
                if logged:
                    self.log.access(resp, req, environ, datetime.now() - started)
                if hasattr(respiter, "close"):
                    respiter.close()
            return not resp.should_close()
        except OSError:
            return False
        except Exception:
            self.log.exception("error answering %s", getattr(req, "path", "?"))
            if resp is None or not resp.headers_sent:
                self._send(conn, _json_response(500, "Internal Server Error",
                                                "internal error"))
            return False
        finally:
            self._release(getattr(req, "poolguard_large", False))

