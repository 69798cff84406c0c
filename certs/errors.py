"""The certs tool's error: unusable input, printed as one `error:` line, exit code 2."""

from __future__ import annotations

from webhook.errors import InputError


class CertsError(InputError):
    """Printed as one `error:` line; exit code 2."""
