"""The exceptions poolguard raises on purpose."""

from __future__ import annotations


class CommandError(Exception):
    """Unusable input for a command: printed as one `error:` line, exit code 2."""
