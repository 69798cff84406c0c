"""Atomic certificate files (certs.files): modes, pairs, readers during renewals."""

from __future__ import annotations

import os
import ssl
import threading
from pathlib import Path

import pytest

from certs import pki
from certs.files import write_atomic, write_pair
from tests.support.install import (
    mode_of,
)

# =========================================================================== certs: atomic files


def test_write_atomic_sets_the_mode_from_the_start_and_leaves_no_temp_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "tls.key"
    old_umask = os.umask(0)
    try:
        write_atomic(target, b"secret", 0o600)
    finally:
        os.umask(old_umask)
    assert mode_of(target) == 0o600 and target.read_bytes() == b"secret"

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_atomic(target, b"new", 0o600)
    monkeypatch.undo()
    assert target.read_bytes() == b"secret"  # the old file survives a failed write
    assert [p.name for p in tmp_path.iterdir()] == ["tls.key"]


def test_write_pair_keeps_an_unchanged_key_file(tmp_path: Path) -> None:
    ca = pki.generate_ca()
    key_pem, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"])
    write_pair(tmp_path / "tls.key", key_pem, tmp_path / "tls.crt", cert_pem)
    inode = (tmp_path / "tls.key").stat().st_ino
    _, renewed = pki.generate_serving_cert(*ca, ["a.svc"], key_pem=key_pem)
    write_pair(tmp_path / "tls.key", key_pem, tmp_path / "tls.crt", renewed)
    assert (tmp_path / "tls.key").stat().st_ino == inode
    assert (tmp_path / "tls.crt").read_bytes() == renewed


def test_a_reloading_reader_never_sees_a_mismatched_pair_during_renewals(
        tmp_path: Path) -> None:
    """The server's reload (ssl load_cert_chain: tls.crt, then tls.key) while `renew` runs."""
    ca = pki.generate_ca()
    key_pem, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"])
    write_pair(tmp_path / "tls.key", key_pem, tmp_path / "tls.crt", cert_pem)
    stop = threading.Event()
    failures: list[str] = []
    loads = 0

    def reader() -> None:
        nonlocal loads
        while not stop.is_set():
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            try:
                context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
            except (ssl.SSLError, OSError) as err:
                failures.append(repr(err))
            loads += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(60):
            _, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"], key_pem=key_pem)
            write_pair(tmp_path / "tls.key", key_pem, tmp_path / "tls.crt", cert_pem)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert loads > 0
    assert failures == []
