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

ENDPOINTS: dict[str, Handler] = {
    "/mutate-pods": review_pod_create,
    "/mutate-bindings": review_binding,
    "/validate-scale": review_scale,
    "/validate-workloads": review_workload,
}


def _json(status: int, payload: Any) -> Response:
    return Response(orjson.dumps(payload), status=status, content_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json(status, {"error": message, "code": status})


def create_app(runtime: Runtime, require_client_cert: bool = False) -> Flask:
    """The WSGI app for `runtime`; every answer is JSON, never an HTML error page.

    With `require_client_cert`, the admission endpoints answer only clients whose TLS
    certificate the worker verified (`serve --client-ca`); probes and metrics stay open.
    """
    app = Flask("poolguard")
    measured = metrics.admission()

    for path, handler in ENDPOINTS.items():
        view = _admission_view(runtime, path, handler, require_client_cert)
        app.add_url_rule(path, path, view, methods=["POST"])

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
        log.exception("unexpected error answering %s", request.path)
        return _error(500, "internal error; the server log has the details")

    return app


def _admission_view(runtime: Runtime, endpoint: str, handler: Handler,
                    require_client_cert: bool) -> Callable[[], Response]:
    measured = metrics.admission()
    # Labelled children looked up once, not per request.
    counters = {result: measured.requests.labels(endpoint, result)
                for result in ("allowed", "patched", "warned", "denied", "bad-request",
                               "error")}
    latency = measured.latency.labels(endpoint)

    def view() -> Response:
        started = time.perf_counter()
        if require_client_cert and not request.environ.get(CLIENT_CERT_KEY):
            counters["bad-request"].inc()
            return _error(403, "a client certificate signed by the --client-ca is required")
        result = "error"  # an exception escaping _answer is a bug: answered 500 by Flask
        try:
            status, result = _answer(runtime, handler)
        finally:
            counters[result].inc()
            latency.observe(time.perf_counter() - started)
        return status

    view.__name__ = endpoint.strip("/").replace("-", "_")
    return view


def _read_body() -> bytes | None:
    """The request body, or None when it is larger than MAX_BODY_BYTES."""
    # The raw input: gunicorn's workers (and the test client) bound it, and werkzeug's
    # wrapper stream costs more than the read.
    stream = request.environ["wsgi.input"]
    length = request.content_length
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


def _answer(runtime: Runtime, handler: Handler) -> tuple[Response, str]:
    """(HTTP response, result label) for one admission request."""
    if request.mimetype != "application/json":
        return _error(415, "Content-Type must be application/json"), "bad-request"
    raw = _read_body()
    if raw is None:
        return _error(413, f"body exceeds the {MAX_BODY_BYTES}-byte limit"), "bad-request"
    if json_values_at_most(raw) > MAX_JSON_VALUES:
        return _error(413, f"body has more than {MAX_JSON_VALUES} JSON values"), "bad-request"
    try:
        if len(raw) > LARGE_BODY_BYTES:
            with _large_parses:
                body = orjson.loads(raw)
        else:
            body = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        # The parser's positions and internals mean nothing to the caller.
        deep = "depth" in str(err)
        return _error(400, "body is not valid JSON" + (" (nested over 1024 levels)" if deep
                                                       else "")), "bad-request"
    try:
        admission_request = parse_review(body)
        response = respond(request.path, handler, admission_request, runtime.context())
    except InputError as err:
        # Bad input is rejected by explicit shape checks (parse_review, core.shape); any
        # other exception is a bug, answered 500 and logged by the app's error handler.
        return _error(400, f"not a usable AdmissionReview: {err}"), "bad-request"
    return _json(200, review(response)), _result_label(response)


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
