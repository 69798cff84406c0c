"""The files of a `python -m certs` --out-dir: where each one is, read and written with
errors that name the file (each write atomic: certs.files)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import CertsError
from .files import KEY_MODE, write_atomic, write_pair
from .manifests import secret_manifest


@dataclass(frozen=True)
class Layout:
    """The files of an --out-dir."""

    directory: Path

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def key(self) -> Path:
        return self.directory / "tls.key"

    @property
    def cert(self) -> Path:
        return self.directory / "tls.crt"

    @property
    def secret(self) -> Path:
        return self.directory / "secret.yaml"



def read_file(path: Path, what: str) -> bytes:
    """The file's bytes; a CertsError naming `what` and the path when it cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CertsError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise CertsError(f"{what} {path}: is a directory, not a file") from None
    except OSError as err:
        raise CertsError(f"{what} {path}: cannot read it: {err.strerror}") from None


def prepare_out_dir(directory: Path) -> None:
    """Create the directory (mode 0700) if needed and make sure we can write into it."""
    if directory.exists() and not directory.is_dir():
        raise CertsError(f"--out-dir {directory}: exists and is not a directory")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as err:
        raise CertsError(f"--out-dir {directory}: cannot create it: {err.strerror}") from None
    probe = directory / ".poolguard-write-test"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise CertsError(f"--out-dir {directory}: not writable: {err.strerror}") from None


def write_file(path: Path, data: bytes, mode: int) -> None:
    """Write the file atomically with `mode`; a CertsError naming it on failure."""
    try:
        write_atomic(path, data, mode)
    except OSError as err:
        raise CertsError(f"cannot write {path}: {err.strerror}") from None


def write_key_and_cert(key_path: Path, key_pem: bytes, cert_path: Path, cert_pem: bytes) -> None:
    """Write a key and its certificate as a pair (certs.files.write_pair)."""
    try:
        write_pair(key_path, key_pem, cert_path, cert_pem)
    except OSError as err:
        raise CertsError(f"cannot write {key_path} / {cert_path}: {err.strerror}") from None


def write_secret(layout: Layout, name: str, namespace: str) -> None:
    """Write secret.yaml: the TLS Secret `namespace/name` with the out-dir's CA, cert, key."""
    secret = secret_manifest(name, namespace, read_file(layout.ca_cert, "CA certificate"),
                             read_file(layout.cert, "certificate"), read_file(layout.key, "key"))
    write_file(layout.secret, secret, KEY_MODE)
