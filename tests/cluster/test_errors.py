"""The API-error branch: a status from the API server becomes the exception callers catch."""

from __future__ import annotations

import json

import pytest

from webhook.errors import (
    ApiError,
    ConflictError,
    GoneError,
    InputError,
    NotFoundError,
    PoolguardError,
)


@pytest.mark.parametrize(("status", "kind"), [(404, NotFoundError), (409, ConflictError),
                                              (410, GoneError), (500, ApiError),
                                              (403, ApiError)])
def test_a_status_body_becomes_its_typed_error(status: int, kind: type[ApiError]) -> None:
    body = json.dumps({"kind": "Status", "reason": "Because", "message": "it\n  said so"})
    err = ApiError.from_body(status, "HTTP reason", body.encode(), "PATCH /api/v1/x")
    assert type(err) is kind and isinstance(err, PoolguardError)
    assert str(err) == f"PATCH /api/v1/x: HTTP {status} Because: it said so"
    assert not isinstance(err, InputError)


def test_a_body_that_is_not_a_status_keeps_the_http_reason() -> None:
    err = ApiError.from_body(409, "Conflict", b"<html>busy</html>")
    assert isinstance(err, ConflictError) and str(err) == "HTTP 409 Conflict: <html>busy</html>"
