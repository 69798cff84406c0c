"""The reconciler's /metrics and /healthz endpoint with clients that misbehave: a probe
that hangs up before its answer, a connection that never sends a request."""

from __future__ import annotations

import socket
import struct
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from webhook.reconciler import metrics as metrics_module
from webhook.reconciler.metrics import Metrics, serve_http


@contextmanager
def endpoint(health: Callable[[], tuple[bool, dict[str, Any]]]) -> Iterator[int]:
    server = serve_http(0, Metrics(), health, host="127.0.0.1")
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_client_that_hangs_up_before_its_answer_leaves_no_traceback(
        capfd: pytest.CaptureFixture[str]) -> None:
    client_gone, answering = threading.Event(), threading.Event()

    def slow_health() -> tuple[bool, dict[str, Any]]:
        answering.set()
        client_gone.wait(5)  # answer only once the client has reset the connection
        return True, {}

    with endpoint(slow_health) as port:
        probe = socket.create_connection(("127.0.0.1", port))
        probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answering.wait(5)
        # SO_LINGER 0: close sends a reset, as a probe client that timed out may.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        probe.close()
        client_gone.set()
        # The server goes on answering; the next request is served after the failed write.
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    assert b"poolguard_reconciler_patches" in body
    assert "Traceback" not in capfd.readouterr().err


def test_an_idle_connection_is_closed_after_the_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_module, "IDLE_TIMEOUT_S", 0.3)
    with endpoint(lambda: (True, {})) as port:
        idle = socket.create_connection(("127.0.0.1", port))
        idle.settimeout(10)
        try:
            assert idle.recv(1) == b""  # the server closed it: no request ever came
        finally:
            idle.close()
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read()
    assert b'"ok": true' in body
