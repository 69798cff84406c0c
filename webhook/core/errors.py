"""The root of poolguard's exceptions, here so the pure core can use it too.

webhook.errors builds the rest of the hierarchy on these two classes.
"""

from __future__ import annotations


class PoolguardError(Exception):
    """Base of every exception poolguard raises on purpose."""


class InputError(PoolguardError, ValueError):
    """Unusable input: a file, a flag, a policy field, an object. Every command prints it as
    one `error:` line and exits 2; the admission server answers it with a 4xx."""
