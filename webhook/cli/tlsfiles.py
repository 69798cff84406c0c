"""PEM files given on a command line: which one is wrong, and how, in one line.

OpenSSL says `[SSL] PEM lib` for a certificate and key swapped, and cryptography answers
with a link to its FAQ; a user needs the file named and what it holds instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

_BEGIN = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")


def pem_hint(data: bytes, wanted: str) -> str:
    """Why `data` is not the PEM `wanted` (CERTIFICATE or PRIVATE KEY): " (...)" or ""."""
    labels = _BEGIN.findall(data)
    if not labels:
        return " (no -----BEGIN ...----- block in it)"
    found = labels[0].decode()
    if wanted in found:
        return f" (its {found} block cannot be decoded)"
    if found.endswith("PRIVATE KEY"):
        return " (it holds a private key)"
    if found.endswith("CERTIFICATE"):
        return " (it holds a certificate)"
    return f" (it holds a {found} block)"


def tls_file_problem(files: dict[str, tuple[str, str]]) -> str | None:
    """The first of `files` ({flag: (path, CERTIFICATE|PRIVATE KEY)}) that is not what its
    flag needs, as `FLAG PATH: not a PEM ... (why)`; None when each parses."""
    for flag, (path, wanted) in files.items():
        try:
            data = Path(path).read_bytes()
        except OSError as err:
            return f"{flag} {path}: cannot read it: {err.strerror}"
        try:
            if wanted == "CERTIFICATE":
                x509.load_pem_x509_certificates(data)
            else:
                serialization.load_pem_private_key(data, password=None)
        except TypeError:
            return f"{flag} {path}: the private key is encrypted; use an unencrypted PEM key"
        except ValueError:
            noun = "certificate" if wanted == "CERTIFICATE" else "private key"
            return f"{flag} {path}: not a PEM {noun}{pem_hint(data, wanted)}"
    return None
