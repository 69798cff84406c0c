"""gunicorn's HTTP/1.1 classes, trimmed to what the admission worker (worker.py) needs.

The parser, request, response and WSGI environ are gunicorn's, minus the per-request work
that has no use when the API server calls the webhook directly: forwarding headers,
settings resolved through `Config` on every read, a `Server:` banner, and head and body
sent as two TLS records. `error_response` is the raw answer the worker writes itself when
a request never reaches the app (its body is limits.py's `error_body`).
"""

from __future__ import annotations

import time
from typing import Any

from gunicorn import util
from gunicorn.http import errors as http_errors
from gunicorn.http import wsgi
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser

from .limits import error_body

# Body framing errors: a malformed chunked body, or chunk trailers over the limits.
FRAMING_ERRORS = (http_errors.InvalidChunkSize, http_errors.ChunkMissingTerminator,
                  http_errors.InvalidChunkExtension, http_errors.LimitRequestHeaders,
                  http_errors.InvalidHeader)
# Request-line and header errors gunicorn answers itself, with a 4xx.
HEAD_ERRORS = (http_errors.ParseException, http_errors.LimitRequestLine,
               http_errors.LimitRequestHeaders)


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


class DirectRequest(Request):
    """gunicorn's request, trusting no forwarding headers from any peer.

    The API server calls the webhook directly, never through a proxy, so neither
    `X-Forwarded-*` headers nor the peer-address check behind them (an IP parse per
    request) have a use here.
    """

    def _peer_trusted_for_forwarded(self) -> tuple[dict, list]:
        return {}, []


class AdmissionParser(RequestParser):
    """gunicorn's HTTP/1.1 request parser (its C parser when installed), for our requests."""

    mesg_class = DirectRequest

    def finish_body(self, deadline: float | None = None, max_bytes: int | None = None) -> bool:
        """Nothing is left to drain: the worker reads every body whole before the app runs
        (or closes the connection), so gunicorn's drain and its two socket-timeout calls
        per request are skipped."""
        return True


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


def error_response(status: int, reason: str, message: str, close: bool = True) -> bytes:
    """A whole HTTP/1.1 error answer with a JSON body, for requests the app never sees."""
    body = error_body(status, message)
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n")
    return head.encode("latin-1") + body


def wsgi_environ(base: dict[str, Any], script_name: str, req: Any, conn: Any, addr: Any,
                 listener_name: Any) -> dict[str, Any]:
    """The WSGI environ of `req`, as gunicorn's `wsgi.create` builds it for the worker's
    one case: HTTP/1.1 on a TCP listener, no proxy protocol, 100-continue already sent.

    It starts from `base`, the worker's copy of the constant part, instead of building
    that (a logger lookup under a lock among it) for every request.
    """
    environ = base.copy()
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
    if script_name:
        if not path.startswith(script_name):
            raise ValueError(f"request path {path!r} does not start with SCRIPT_NAME "
                             f"{script_name!r}")
        path = path[len(script_name):]
    environ["PATH_INFO"] = util.unquote_to_wsgi_str(path)
    environ["SCRIPT_NAME"] = script_name
    return environ
