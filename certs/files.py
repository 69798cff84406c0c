"""Crash-safe file writes for keys, certificates and manifests.

Every file is written atomically: the bytes go to a temporary file in the same directory
(created with the final mode, so a key is never readable by others, not even briefly),
which is flushed and fsync'ed and then renamed over the old name with `os.replace`. A
rename within one filesystem is atomic, so a reader that opens the file sees either the
whole old contents or the whole new contents, never a half-written file, and a crash
leaves the old file in place. The directory is fsync'ed afterwards so the rename survives
a power loss.

A key and its certificate are two files, and no order of two renames can make a reader
that opens `tls.crt` and then `tls.key` always see a matching pair while *both* change:
between its two opens the writer may replace either one. So `write_pair` avoids changing
both whenever it can:

* Renewal keeps the private key (`python -m certs renew` reuses `tls.key` unless told
  otherwise), so only `tls.crt` changes, in one rename. Every reader, at any moment, gets
  the old certificate or the new one, and both match the unchanged key.
* When the key itself must change (`create --force`, `renew --new-key`, a different
  `--key-type`), the key is renamed into place first and the certificate last, and the
  key is skipped entirely when its bytes are unchanged. A reloader that watches
  `tls.crt` (or reloads on any change after a short settle delay) therefore loads the new
  pair. A reader that loaded the old `tls.crt` just before and the new `tls.key` just after
  the key's rename gets a mismatched pair: the TLS library rejects it ("key values
  mismatch"), and the server must keep serving with its current pair and retry the load
  shortly. That is the same contract as a Kubernetes Secret volume, whose files change
  together but are still opened one at a time.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

KEY_MODE = 0o600
PUBLIC_MODE = 0o644


def write_atomic(path: Path, data: bytes, mode: int = PUBLIC_MODE) -> None:
    """Replace `path` with `data` in one rename; the file has `mode` from the start."""
    directory = path.parent
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems do not support fsync on directories
    finally:
        os.close(fd)


def write_pair(key_path: Path, key_pem: bytes, cert_path: Path, cert_pem: bytes) -> None:
    """Install a key and its certificate; see the module docstring for the ordering."""
    try:
        unchanged = key_path.read_bytes() == key_pem
    except OSError:
        unchanged = False
    if not unchanged:
        write_atomic(key_path, key_pem, KEY_MODE)
    write_atomic(cert_path, cert_pem, PUBLIC_MODE)
