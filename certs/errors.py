"""The certs tool's error: unusable input, printed as one `error:` line, exit code 2."""

from __future__ import annotations


class CertsError(Exception):
    """Printed as one `error:` line; exit code 2."""
