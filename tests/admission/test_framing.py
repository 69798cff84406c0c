"""HTTP framing, TLS and headers of `serve` as `make run` starts it, over raw TLS sockets.

Broken framing gets a 4xx or a closed connection, never a 5xx or a traceback in the log;
TLS 1.2 offers only AEAD suites; no `Server:` banner; `/readyz` shows no process details.
"""

from __future__ import annotations

import json
import socket
import ssl
import time

import pytest

from tests.support import factories as f
from tests.support import reviews
from tests.support.serving import Server, request, served_like_make_run

REVIEW = json.dumps(reviews.pod_create(f.pod("framing", node_name="gpu-hyb-1"))).encode()
HEAD = b"POST /mutate-pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


SERVER = served_like_make_run  # the `server` fixture (conftest.py): exactly as `make run`


def exchange(server: Server, data: bytes, close_after_send: bool = False) -> bytes:
    """Send raw bytes over TLS; everything the server answers until it closes (or 10 s)."""
    raw = socket.create_connection((server.host, server.port), timeout=10)
    with server.client_context().wrap_socket(raw, server_hostname="localhost") as sock:
        sock.sendall(data)
        if close_after_send:
            return b""
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
                if answer.count(b"\r\n\r\n") and _complete(answer):
                    break
        except (TimeoutError, ssl.SSLError, ConnectionResetError):
            pass
        return answer


def _complete(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def chunked(*chunks: bytes) -> bytes:
    return HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(chunks)


MALFORMED = {
    "chunk size not hex": chunked(b"zz\r\n{}\r\n0\r\n\r\n"),
    "chunk longer than its size": chunked(b"2\r\n{}}}}\r\n0\r\n\r\n"),
    "chunk without its CRLF": chunked(b"2\r\n{}XX0\r\n\r\n"),
    "negative chunk size": chunked(b"-5\r\n{}\r\n0\r\n\r\n"),
    "huge chunk size": chunked(b"ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n"),
    "chunk extension garbage": chunked(b"2;\x01\r\n{}\r\n0\r\n\r\n"),
    "content-length not a number": HEAD + b"Content-Length: 12a\r\n\r\n{}",
    "two content-lengths": HEAD + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "chunked and content-length": HEAD + b"Content-Length: 2\r\n"
                                         b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    "header without colon": HEAD + b"Bogus header line\r\n\r\n",
    "request line garbage": b"\x16\x03\x01 / HTTP/1.1\r\n\r\n",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_framing_gets_a_4xx_or_a_close_never_a_5xx(server: Server, case: str) -> None:
    answer = exchange(server, MALFORMED[case])
    assert answer == b"" or 400 <= status_of(answer) < 500, (case, answer[:300])


def test_client_gone_mid_body_leaves_no_trace_and_the_server_answers(server: Server) -> None:
    before = server.log.read_text()
    for _ in range(20):
        exchange(server, HEAD + b"Content-Length: 100000\r\n\r\n" + REVIEW[:50],
                 close_after_send=True)
        exchange(server, chunked(b"400\r\n" + REVIEW[:100]), close_after_send=True)
    status, _, body = request(server, "POST", "/mutate-pods", REVIEW)
    assert status == 200 and json.loads(body)["response"]["allowed"] is True
    time.sleep(0.5)  # let the worker log whatever it logs about the broken ones
    new_log = server.log.read_text()[len(before):]
    assert "Traceback" not in new_log and " 500 " not in new_log, new_log[-2000:]


def test_malformed_framing_never_logs_a_traceback(server: Server) -> None:
    for data in MALFORMED.values():
        exchange(server, data)
    time.sleep(0.5)
    assert "Traceback" not in server.log.read_text()


def test_chunked_and_expect_continue_bodies_are_served(server: Server) -> None:
    body = REVIEW
    answer = exchange(server, chunked(b"%x\r\n" % 10, body[:10], b"\r\n",
                                      b"%x\r\n" % (len(body) - 10), body[10:], b"\r\n0\r\n\r\n"))
    assert status_of(answer) == 200, answer[:300]
    answer = exchange(server, HEAD + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n"
                      % len(body) + body)
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 "), answer[:300]


def test_too_large_body_gets_413_naming_the_limit(server: Server) -> None:
    status, _, body = request(server, "POST", "/mutate-pods", b" " * (4 * 1024 * 1024),
                              timeout=10)
    assert status == 413 and "3145728-byte limit" in json.loads(body)["error"]


def test_no_server_banner_and_readyz_without_process_details(server: Server) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        _, headers, _ = request(server, "GET", path)
        assert "server" not in {name.lower() for name in headers}, (path, headers)
    status, _, body = request(server, "GET", "/readyz")
    details = json.loads(body)
    assert status == 200 and details["ready"] is True
    assert set(details) <= {"ready", "policy", "cache", "policyError", "policyNodes",
                            "policyRefused", "resources", "memory"}, details
    _, headers, _ = request(server, "POST", "/mutate-pods", REVIEW)
    assert "server" not in {name.lower() for name in headers}


def handshake(server: Server, version: ssl.TLSVersion, ciphers: str | None = None) -> str:
    context = server.client_context()
    context.minimum_version = context.maximum_version = version
    if ciphers:
        context.set_ciphers(ciphers)
    raw = socket.create_connection((server.host, server.port), timeout=5)
    with context.wrap_socket(raw, server_hostname="localhost") as sock:
        return sock.cipher()[0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # TLS 1.0/1.1 named on purpose
def test_tls_12_offers_only_aead_suites_and_13_works(server: Server) -> None:
    assert handshake(server, ssl.TLSVersion.TLSv1_3)
    suite = handshake(server, ssl.TLSVersion.TLSv1_2)
    assert "GCM" in suite or "CHACHA20" in suite, suite
    for cbc in ("ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384",
                "ECDHE-ECDSA-AES128-SHA256", "ECDHE-RSA-AES128-SHA"):
        with pytest.raises(ssl.SSLError):
            handshake(server, ssl.TLSVersion.TLSv1_2, cbc)
    for old in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
        with pytest.raises(ssl.SSLError):
            handshake(server, old, "DEFAULT:@SECLEVEL=0")

