"""Requests the API server never sends, over real HTTPS: a wrong method answers like every
other (JSON 405 with `Allow: POST`), and every bad request is logged with its reason."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from tests.support.serving import serve_example


@contextmanager
def serve_logged(directory: Path) -> Iterator[tuple[str, requests.Session, Path]]:
    """The example server, and its log: (url, session, log file)."""
    with serve_example(directory) as (url, session):
        yield url, session, directory / "server.log"


SERVER = serve_logged  # the `server` fixture (conftest.py)


@pytest.mark.parametrize("method", ["OPTIONS", "GET", "PUT"])
@pytest.mark.parametrize("path", ["/mutate-pods", "/validate-scale"])
def test_a_wrong_method_is_a_json_405_naming_post(server, method: str, path: str) -> None:
    url, session, _ = server
    answer = session.request(method, url + path, timeout=5)
    assert answer.status_code == 405
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.headers["Allow"] == "POST"
    assert answer.json()["code"] == 405


def wait_for_line(log: Path, *fragments: str) -> str:
    deadline = time.monotonic() + 10
    while True:
        for line in log.read_text().splitlines():
            if all(fragment in line for fragment in fragments):
                return line
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def test_a_bad_request_is_logged_with_its_reason(server) -> None:
    url, session, log = server
    body = b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "secret": 1}'
    answer = session.post(url + "/validate-scale", data=body,
                          headers={"Content-Type": "application/json"}, timeout=5)
    assert answer.status_code == 400
    line = wait_for_line(log, "/validate-scale: answered 400", "not a usable AdmissionReview")
    assert answer.json()["error"] in line
    assert '"secret"' not in line  # the reason, not the body
    answer = session.post(url + "/mutate-pods", data=b"{not json",
                          headers={"Content-Type": "application/json"}, timeout=5)
    assert answer.status_code == 400
    wait_for_line(log, "/mutate-pods: answered 400: body is not valid JSON")
