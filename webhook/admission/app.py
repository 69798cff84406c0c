"""The Flask app: admission endpoints, health, readiness and metrics."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

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
log = logging.getLogger("poolguard")
Handler = Callable[[dict[str, Any], Context], Decision]

ENDPOINTS: dict[str, Handler] = {
    "/mutate-pods": review_pod_create,
    "/mutate-bindings": review_binding,
    "/validate-scale": review_scale,
    "/validate-workloads": review_workload,
}


def _json(status: int, payload: Any) -> Response:
    return Response(json.dumps(payload, separators=(",", ":")), status=status,
                    mimetype="application/json")


def _error(status: int, message: str) -> Response:
    return _json(status, {"error": message, "code": status})


def create_app(runtime: Runtime) -> Flask:
    """The WSGI app for `runtime`; every answer is JSON, never an HTML error page."""
    app = Flask("poolguard")
    measured = metrics.admission()

    for path, handler in ENDPOINTS.items():
        app.add_url_rule(path, path, _admission_view(runtime, path, handler), methods=["POST"])

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
        return _error(500, f"internal error: {type(err).__name__}")

    return app


def _admission_view(runtime: Runtime, endpoint: str, handler: Handler) -> Callable[[], Response]:
    measured = metrics.admission()

    def view() -> Response:
        started = time.perf_counter()
        result = "error"  # an exception escaping _answer is a bug: answered 500 by Flask
        try:
            status, result = _answer(runtime, handler)
        finally:
            measured.requests.labels(endpoint, result).inc()
            measured.latency.labels(endpoint).observe(time.perf_counter() - started)
        return status

    view.__name__ = endpoint.strip("/").replace("-", "_")
    return view


def _read_body() -> bytes | None:
    """The request body, or None when it is larger than MAX_BODY_BYTES."""
    stream = request.stream
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
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as err:
        return _error(400, f"body is not valid JSON: {str(err)[:200]}"), "bad-request"
    try:
        admission_request = parse_review(body)
        response = respond(request.path, handler, admission_request, runtime.context())
    except InputError as err:
        # Bad input is rejected by explicit shape checks (parse_review, core.shape); any
        # other exception is a bug, answered 500 and logged by the app's error handler.
        return _error(400, f"not a usable AdmissionReview: {err}"), "bad-request"
    return _json(200, review(response)), _result_label(response)


def respond(endpoint: str, handler: Handler, admission_request: dict[str, Any],
            ctx: Context) -> dict[str, Any]:
    """Run one handler; record its decision in the metrics and the audit annotations."""
    decision = handler(admission_request, ctx)
    measured = metrics.admission()
    measured.decisions.labels(endpoint, decision.outcome.value).inc()
    for rule in decision.violated_rules:
        measured.decisions.labels(endpoint, f"violation:{rule}").inc()
        measured.violations.labels(rule, ctx.policy.scale_down.enforcement).inc()
    return decision.final_response()


def _result_label(response: dict[str, Any]) -> str:
    if not response.get("allowed"):
        return "denied"
    if response.get("patch"):
        return "patched"
    return "warned" if response.get("warnings") else "allowed"
