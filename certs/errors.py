"""The certs tool's error (unusable input, printed as one `error:` line) and its exit codes."""

from __future__ import annotations

from webhook.errors import InputError

EXIT_OK = 0
EXIT_USAGE = 2  # CertsError, PKIError: one `error:` line


class CertsError(InputError):
    """Printed as one `error:` line; exit code 2."""
