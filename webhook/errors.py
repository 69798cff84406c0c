"""The one exception hierarchy.

    PoolguardError                      (webhook.core.errors)
    ├── InputError (also a ValueError)  unusable input: one `error:` line, exit code 2
    │   ├── CommandError                a command's flags or files
    │   ├── PolicyError, ShapeError, SelectorError, InvalidDeletionCost   (webhook.core)
    │   ├── StateError, KubeConfigError, PlanError, ReconcileError, BadReview
    │   └── CertsError, PKIError                                          (certs)
    ├── ApiError                        a non-2xx answer from the Kubernetes API server
    │   ├── NotFoundError               404
    │   ├── ConflictError               409
    │   └── GoneError                   410 (a watch's resourceVersion expired)
    └── LeaseHeldError                  another reconciler holds the lease

Call sites catch the subclass they handle (`except ConflictError`) instead of comparing
`err.status` with numbers.
"""

from __future__ import annotations

import json
from typing import Any

from .core.errors import InputError, PoolguardError

__all__ = ["ApiError", "CommandError", "ConflictError", "GoneError", "InputError",
           "LeaseHeldError", "NotFoundError", "PoolguardError"]

EXIT_USAGE = 2  # every command, for every InputError


class CommandError(InputError):
    """Unusable input for a command: printed as one `error:` line, exit code 2."""


class LeaseHeldError(PoolguardError, RuntimeError):
    """Another reconciler holds the Lease: a one-shot pass must not run beside it."""


class ApiError(PoolguardError):
    """A non-2xx answer from the API server, with its Status fields.

    Raisers build it with `ApiError.of(status, ...)` (or from_body), which picks the
    subclass for the status, so a caller writes `except ConflictError:`.
    """

    status_code: int | None = None
    # The Status's details.causes messages (from_body), e.g. which PodDisruptionBudget
    # refused an eviction and how many healthy pods it needs.
    causes: tuple[str, ...] = ()

    def __init__(self, status: int, reason: str, message: str, request: str = "") -> None:
        text = f"HTTP {status} {reason}" + (f": {message}" if message else "")
        super().__init__(f"{request}: {text}" if request else text)
        self.status, self.reason, self.message = status, reason, message

    @staticmethod
    def of(status: int, reason: str, message: str, request: str = "") -> ApiError:
        """The ApiError subclass for `status` (plain ApiError for the others)."""
        return _BY_STATUS.get(status, ApiError)(status, reason, message, request)

    @staticmethod
    def from_body(status: int, http_reason: str, data: bytes,
                  request: str = "") -> ApiError:
        """Decode a Status body if there is one (its reason and message read better)."""
        try:
            body = json.loads(data or b"{}")
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        message = str(body.get("message") or data[:200].decode("utf-8", "replace"))
        error = ApiError.of(status, str(body.get("reason") or http_reason or ""),
                            one_line(message), request)
        error.causes = _cause_messages(body.get("details"))
        return error


def _cause_messages(details: Any) -> tuple[str, ...]:
    """The messages of a Status's `details.causes` (none when it has no such list)."""
    causes = details.get("causes") if isinstance(details, dict) else None
    if not isinstance(causes, list):
        return ()
    return tuple(one_line(str(c["message"])) for c in causes
                 if isinstance(c, dict) and c.get("message"))


class NotFoundError(ApiError):
    """404: the object (or its namespace) does not exist."""

    status_code = 404


class ConflictError(ApiError):
    """409: the object changed since it was read, or it already exists."""

    status_code = 409


class GoneError(ApiError):
    """410: the resourceVersion a watch resumed from has expired."""

    status_code = 410


_BY_STATUS: dict[int, type[ApiError]] = {
    sub.status_code: sub for sub in (NotFoundError, ConflictError, GoneError)
    if sub.status_code is not None
}


def one_line(text: str) -> str:
    """Whitespace runs (API messages may hold newlines) as single spaces."""
    return " ".join(text.split())
