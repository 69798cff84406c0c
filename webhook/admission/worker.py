"""The gunicorn worker `serve` runs: gevent, with deadlines on every phase a client controls.

One process serves every connection in greenlets, so a connection that sends nothing costs
a socket and a few kilobytes, not a thread. What a client controls is bounded in time:

- the TLS handshake must finish within `HANDSHAKE_SECONDS`;
- once the first byte of a request has arrived, its request line and headers must arrive
  within `HEAD_SECONDS`, and its body within `BODY_SECONDS`;
- a connection may sit idle before its first request and between requests for
  `IDLE_SECONDS` (longer than client-go's 90 s, so the API server, not poolguard, closes
  idle connections). Go's transport parks a connection it dialled for a request that
  another connection served; closing it early would make the API server's next POST on
  it fail (`broken pipe`, not retried: the webhook call fails open). An idle TLS
  connection costs the same whether it has served a request or not.

The body is read here, before the app runs, so a slow or broken body never reaches Flask:
malformed chunked framing gets a 400, a body over the limit a 413, a body too slow a 408,
a client gone mid-body a closed connection, and none of them a traceback. Bodies over
`LARGE_BODY_BYTES` (limits.py) are read and answered at most `LARGE_BODY_SLOTS` at a time,
which bounds the memory a burst of large hostile bodies can take. The HTTP/1.1 parsing and
writing are gunicorn's, trimmed in http11.py.

gevent patches the standard library when the worker starts, after the fork: the TLS
context is therefore built again in the worker (a context made by the unpatched `ssl`
module cannot wrap gevent's sockets).
"""

from __future__ import annotations

import contextlib
import errno
import io
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
from gunicorn.http import errors as http_errors
from gunicorn.http import wsgi
from gunicorn.http.body import ChunkedReader, LengthReader
from gunicorn.workers.ggevent import GeventWorker

from .certwatcher import CLIENT_CERT_KEY
from .http11 import (
    FRAMING_ERRORS,
    HEAD_ERRORS,
    AdmissionParser,
    PlainConfig,
    QuietResponse,
    error_response,
    wsgi_environ,
)
from .limits import DRAIN_LIMIT, LARGE_BODY_BYTES, MAX_BODY_BYTES, TOO_LARGE

HANDSHAKE_SECONDS = 5.0
HEAD_SECONDS = 5.0
BODY_SECONDS = 5.0
IDLE_SECONDS = 120.0
LARGE_BODY_SLOTS = 4  # at most this many bodies over LARGE_BODY_BYTES are read at once


class Deadline(Exception):
    """A client took longer than its deadline for one phase of a request."""

    def __init__(self, phase: str) -> None:
        super().__init__(phase)
        self.phase = phase


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
        self._send(conn, error_response(status, reason, f"malformed request: {str(err)[:80]}"))

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
        large = length is None or length > LARGE_BODY_BYTES
        if large and not self.large_bodies.acquire(timeout=BODY_SECONDS):
            self._send(conn, error_response(503, "Service Unavailable",
                                            "too many large requests at once; retry"))
            return False
        deadline.start()
        try:
            data = req.body.read(MAX_BODY_BYTES + 1)
        except Deadline:
            self._send(conn, error_response(408, "Request Timeout",
                                            f"request body not received within "
                                            f"{BODY_SECONDS:.0f} s"))
            self._release(large)
            return False
        except FRAMING_ERRORS as err:
            self._send(conn, error_response(400, "Bad Request",
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
        self._send(conn, error_response(413, "Payload Too Large", TOO_LARGE))

    # --- the response -------------------------------------------------------------------

    def _respond(self, listener_name: Any, req: Any, conn: Any, addr: Any,
                 peer: dict | None) -> bool:
        """Run the app for `req`; False when the connection must close afterwards."""
        logged = self.log.access_log_enabled
        started = datetime.now() if logged else None
        environ: dict[str, Any] = {}
        resp = None
        try:
            resp = QuietResponse(req, conn, self.plain_cfg)
            environ = wsgi_environ(self.environ_base, self.script_name, req, conn, addr,
                                   listener_name)
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
                self._send(conn, error_response(500, "Internal Server Error",
                                                "internal error"))
            return False
        finally:
            self._release(getattr(req, "poolguard_large", False))

