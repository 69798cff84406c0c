"""The WSGI app: the admission endpoints, health, readiness and metrics.

`create_app` builds the Flask app (every answer JSON, never an HTML error page), and
`with_fast_admission` puts a thin WSGI layer in front that answers the admission POSTs
without Flask. Both run one `Endpoint` per path of handlers.ENDPOINTS: client-certificate
check, body bounds (limits.py), parsing (review.py), the handler, and its metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed
from werkzeug.http import HTTP_STATUS_CODES, parse_options_header
from werkzeug.wsgi import get_content_length

from ..errors import InputError
from . import metrics
from .certwatcher import CLIENT_CERT_KEY
from .handlers import ENDPOINTS, Context, Handler
from .limits import (
    DRAIN_LIMIT,
    LARGE_BODY_BYTES,
    MAX_BODY_BYTES,
    MAX_JSON_VALUES,
    TOO_LARGE,
    error_body,
    json_values_at_most,
)
from .review import AdmissionRequest, AdmissionResponse, parse_review, review
from .runtime import Runtime

# One large parse at a time: under the gevent worker this lock is gevent's, so a review
# that arrives during a burst of large bodies waits for one parse at most, not for all.
_large_parses = threading.Lock()
log = logging.getLogger("poolguard")
Answer = tuple[int, bytes]  # HTTP status and JSON body


JSON_HEADERS = ("Content-Type", "application/json")
INTERNAL_ERROR = "internal error; the server log has the details"


def _json(status: int, payload: Any) -> Response:
    return Response(orjson.dumps(payload), status=status, content_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json_answer(_error_body(status, message))


def _error_body(status: int, message: str) -> Answer:
    return status, error_body(status, message)


def create_app(runtime: Runtime, require_client_cert: bool = False) -> Flask:
    """The Flask app for `runtime`; every answer is JSON, never an HTML error page.

    With `require_client_cert`, the admission endpoints answer only clients whose TLS
    certificate the worker verified (`serve --client-ca`); probes and metrics stay open.
    """
    app = Flask("poolguard")
    measured = metrics.admission()
    endpoints = {path: Endpoint(runtime, path, handler, require_client_cert)
                 for path, handler in ENDPOINTS.items()}
    app.extensions[ENDPOINTS_KEY] = endpoints

    for path, endpoint in endpoints.items():
        # No automatic OPTIONS (an empty 200 text/html): it is a wrong method here too.
        app.add_url_rule(path, path, endpoint.flask_view, methods=["POST"],
                         provide_automatic_options=False)

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
        response = _error(err.code or 500, err.description or err.name)
        if isinstance(err, MethodNotAllowed) and err.valid_methods:
            response.headers["Allow"] = ", ".join(err.valid_methods)
        return response

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
    admission decision (about a quarter of the worker's time under load). The layer hands
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
            if result == "bad-request":  # the access log shows only the status
                log.warning("%s: answered %d: %s", self.path, answer[0],
                            orjson.loads(answer[1])["error"])
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
            return _error_body(413, TOO_LARGE), "bad-request"
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


@cache
def _decision_counter(endpoint: str, outcome: str) -> Any:
    return metrics.admission().decisions.labels(endpoint, outcome)


def respond(endpoint: str, handler: Handler, admission_request: AdmissionRequest,
            ctx: Context) -> AdmissionResponse:
    """Run one handler; record its decision in the metrics and the audit annotations."""
    decision = handler(admission_request, ctx)
    _decision_counter(endpoint, decision.outcome.value).inc()
    if decision.counted is not None:
        metrics.outcome_counter(decision.outcome.value).labels(**decision.counted).inc()
    for rule in decision.violated_rules:
        _decision_counter(endpoint, f"violation:{rule}").inc()
        metrics.admission().violations.labels(rule, ctx.policy.scale_down.enforcement).inc()
    return decision.final_response()


def _result_label(response: AdmissionResponse) -> str:
    if not response.get("allowed"):
        return "denied"
    if response.get("patch"):
        return "patched"
    return "warned" if response.get("warnings") else "allowed"
