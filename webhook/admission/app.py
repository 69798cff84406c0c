"""The Flask app: admission endpoints, health, readiness and metrics."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES, parse_options_header
from werkzeug.wsgi import get_content_length

from ..errors import InputError
from . import metrics
from .handlers import (
    Context,
    Decision,
    parse_review,
    review,
    review_binding,
    review_pod_create,
    review_scale,
    review_scale_clamp,
    review_workload,
)
from .runtime import Runtime

MAX_BODY_BYTES = 3 * 1024 * 1024  # the API server's own request limit is 3 MiB
DRAIN_LIMIT = 16 * 1024 * 1024  # read (and drop) this much of a too-large body so the
# client sees the 413 instead of a reset connection; past it, the connection is dropped
# Parsing costs about 1 µs and 80 bytes per JSON value and cannot be interrupted: a 3 MiB
# body of `[]` would hold the worker for ~0.3 s and ~90 MB. A real pod's review has a few
# hundred values; a Deployment at etcd's 1.5 MiB object limit, with its old copy, at most
# ~200,000 (env lists of 3 values per 25 bytes).
MAX_JSON_VALUES = 200_000
LARGE_BODY_BYTES = 64 * 1024  # a pod's review is 3-20 KiB
# One large parse at a time: under the gevent worker this lock is gevent's, so a review
# that arrives during a burst of large bodies waits for one parse at most, not for all.
_large_parses = threading.Lock()
CLIENT_CERT_KEY = "poolguard.client_cert"  # WSGI environ: the verified peer certificate
log = logging.getLogger("poolguard")
Handler = Callable[[dict[str, Any], Context], Decision]
Answer = tuple[int, bytes]  # HTTP status and JSON body

ENDPOINTS: dict[str, Handler] = {
    "/mutate-pods": review_pod_create,
    "/mutate-bindings": review_binding,
    "/mutate-scale": review_scale_clamp,
    "/validate-scale": review_scale,
    "/validate-workloads": review_workload,
}


JSON_HEADERS = ("Content-Type", "application/json")
INTERNAL_ERROR = "internal error; the server log has the details"


def _json(status: int, payload: Any) -> Response:
    return Response(orjson.dumps(payload), status=status, content_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json(status, {"error": message, "code": status})


def _error_body(status: int, message: str) -> Answer:
    return status, orjson.dumps({"error": message, "code": status})


def create_app(runtime: Runtime, require_client_cert: bool = False) -> Flask:
    """The Flask app for `runtime`; every answer is JSON, never an HTML error page.

    With `require_client_cert`, the admission endpoints answer only clients whose TLS
    certificate the worker verified (`serve --client-ca`); probes and metrics stay open.
    `serve` runs it behind `with_fast_admission`, which answers the admission POSTs with
    the same `Endpoint`s without Flask's per-request machinery.
    """
    app = Flask("poolguard")
    measured = metrics.admission()
    endpoints = {path: Endpoint(runtime, path, handler, require_client_cert)
                 for path, handler in ENDPOINTS.items()}
    app.extensions[ENDPOINTS_KEY] = endpoints

    for path, endpoint in endpoints.items():
        app.add_url_rule(path, path, endpoint.flask_view, methods=["POST"])

    @app.get("/healthz")
    def healthz() -> Response:
        return _json(200, {"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        ready, details = runtime.readiness()
        measured.cache_synced.set(1 if ready else 0)
        return _json(200 if ready else 503, {"ready": ready, **details})

    @app.get("/metrics")
    def metrics_view() -> Response:
        ready, _ = runtime.readiness()
        measured.cache_synced.set(1 if ready else 0)
        body, content_type = metrics.render()
        return Response(body, status=200, content_type=content_type)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        return _error(err.code or 500, err.description or err.name)

    @app.errorhandler(Exception)
    def unexpected(err: Exception) -> Response:  # a bug must never take a worker down
        return _json_answer(_unexpected(request.path))

    return app


def _unexpected(path: str) -> Answer:
    """The answer to a bug (an exception no check expected), logged with its traceback."""
    log.exception("unexpected error answering %s", path)
    return _error_body(500, INTERNAL_ERROR)


def _json_answer(answer: Answer) -> Response:
    status, body = answer
    return Response(body, status=status, content_type="application/json")


ENDPOINTS_KEY = "poolguard.admission"
# Status lines as werkzeug writes them (reason upper-cased), so both paths answer alike.
STATUS_LINES = {code: f"{code} {HTTP_STATUS_CODES[code].upper()}"
                for code in (200, 400, 403, 413, 415, 500)}


def with_fast_admission(app: Flask) -> Callable[[dict[str, Any], Callable], Any]:
    """`app` behind a thin WSGI layer that answers the admission POSTs itself.

    Flask's request context, URL matching and response objects cost more CPU than an
    admission decision (issue 13: ~25% of the worker's time under load). The layer hands
    a POST to one of `ENDPOINTS` straight to its `Endpoint.answer`, the code the Flask view
    runs too, and everything else (probes, /metrics, other methods and paths, their
    errors) to Flask. Both paths give the same status, headers and body.
    """
    endpoints: dict[str, Endpoint] = app.extensions[ENDPOINTS_KEY]

    def dispatch(environ: dict[str, Any], start_response: Callable) -> Any:
        endpoint = endpoints.get(environ.get("PATH_INFO", ""))
        if endpoint is None or environ.get("REQUEST_METHOD") != "POST":
            return app(environ, start_response)
        try:
            status, body = endpoint.answer(environ)
        except Exception:  # a bug must never take a worker down; as Flask answers it
            status, body = _unexpected(endpoint.path)
        start_response(STATUS_LINES[status], [JSON_HEADERS,
                                              ("Content-Length", str(len(body)))])
        return [body]

    return dispatch


class Endpoint:
    """One admission endpoint: client-certificate check, body bounds, handler, metrics."""

    def __init__(self, runtime: Runtime, path: str, handler: Handler,
                 require_client_cert: bool) -> None:
        self.runtime, self.path, self.handler = runtime, path, handler
        self.require_client_cert = require_client_cert
        measured = metrics.admission()
        # Labelled children looked up once, not per request.
        self.counters = {result: measured.requests.labels(path, result)
                         for result in ("allowed", "patched", "warned", "denied",
                                        "bad-request", "error")}
        self.latency = measured.latency.labels(path)

    def flask_view(self) -> Response:
        """The Flask view: the same answer, from Flask's request environment."""
        return _json_answer(self.answer(request.environ))

    def answer(self, environ: dict[str, Any]) -> Answer:
        """(HTTP status, JSON body) for one request to this endpoint.

        An exception escaping it is a bug: counted as an error, answered 500 by the caller.
        """
        started = time.perf_counter()
        if self.require_client_cert and not environ.get(CLIENT_CERT_KEY):
            self.counters["bad-request"].inc()
            return _error_body(403, "a client certificate signed by the --client-ca is "
                                    "required")
        result = "error"
        try:
            answer, result = self._answer(environ)
        finally:
            self.counters[result].inc()
            self.latency.observe(time.perf_counter() - started)
        return answer

    def _answer(self, environ: dict[str, Any]) -> tuple[Answer, str]:
        """(answer, result label)."""
        if _mimetype(environ) != "application/json":
            return _error_body(415, "Content-Type must be application/json"), "bad-request"
        raw = _read_body(environ)
        if raw is None:
            return (_error_body(413, f"body exceeds the {MAX_BODY_BYTES}-byte limit"),
                    "bad-request")
        if json_values_at_most(raw) > MAX_JSON_VALUES:
            return (_error_body(413, f"body has more than {MAX_JSON_VALUES} JSON values"),
                    "bad-request")
        try:
            if len(raw) > LARGE_BODY_BYTES:
                with _large_parses:
                    body = orjson.loads(raw)
            else:
                body = orjson.loads(raw)
        except orjson.JSONDecodeError as err:
            # The parser's positions and internals mean nothing to the caller.
            deep = "depth" in str(err)
            return _error_body(400, "body is not valid JSON" + (
                " (nested over 1024 levels)" if deep else "")), "bad-request"
        try:
            admission_request = parse_review(body)
            response = respond(self.path, self.handler, admission_request,
                               self.runtime.context())
        except InputError as err:
            # Bad input is rejected by explicit shape checks (parse_review, core.shape); any
            # other exception is a bug, answered 500 and logged.
            return _error_body(400, f"not a usable AdmissionReview: {err}"), "bad-request"
        return (200, orjson.dumps(review(response))), _result_label(response)


def _mimetype(environ: dict[str, Any]) -> str:
    """The request's media type, lower-cased and without parameters, as werkzeug reads it."""
    content_type = environ.get("CONTENT_TYPE", "")
    if content_type == "application/json":  # what the API server sends: skip the parse
        return content_type
    return parse_options_header(content_type)[0].lower()


def _read_body(environ: dict[str, Any]) -> bytes | None:
    """The request body, or None when it is larger than MAX_BODY_BYTES."""
    # The raw input: gunicorn's workers (and the test client) bound it, and werkzeug's
    # wrapper stream costs more than the read.
    stream = environ["wsgi.input"]
    length = get_content_length(environ)
    if length is not None and length > MAX_BODY_BYTES:
        _drain(stream, min(length, DRAIN_LIMIT))
        return None
    data = stream.read(MAX_BODY_BYTES + 1)
    if len(data) > MAX_BODY_BYTES:
        _drain(stream, DRAIN_LIMIT)
        return None
    return data


def _drain(stream: Any, limit: int) -> None:
    remaining = limit
    while remaining > 0:
        chunk = stream.read(min(remaining, 1 << 16))
        if not chunk:
            return
        remaining -= len(chunk)


def json_values_at_most(raw: bytes) -> int:
    """An upper bound of the number of values in JSON text, found without parsing it.

    The values are the root plus, in each non-empty container, its commas plus one: at
    most 1 + commas + containers. Counting `,`, `[` and `{` bytes (inside strings too,
    which only overcounts) bounds it at the speed of a memory scan.
    """
    if len(raw) <= MAX_JSON_VALUES:  # every value takes at least one byte
        return len(raw)
    return raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1


@cache
def _decision_counter(endpoint: str, outcome: str) -> Any:
    return metrics.admission().decisions.labels(endpoint, outcome)


def respond(endpoint: str, handler: Handler, admission_request: dict[str, Any],
            ctx: Context) -> dict[str, Any]:
    """Run one handler; record its decision in the metrics and the audit annotations."""
    decision = handler(admission_request, ctx)
    _decision_counter(endpoint, decision.outcome.value).inc()
    if decision.counted is not None:
        metrics.outcome_counter(decision.outcome.value).labels(**decision.counted).inc()
    for rule in decision.violated_rules:
        _decision_counter(endpoint, f"violation:{rule}").inc()
        metrics.admission().violations.labels(rule, ctx.policy.scale_down.enforcement).inc()
    return decision.final_response()


def _result_label(response: dict[str, Any]) -> str:
    if not response.get("allowed"):
        return "denied"
    if response.get("patch"):
        return "patched"
    return "warned" if response.get("warnings") else "allowed"
