"""The fake API server's request log: what tests count writes and watches from."""

from __future__ import annotations

from dataclasses import dataclass

WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class Request:
    """One request as the server saw it (the log tests count writes from)."""

    method: str
    path: str
    query: dict[str, str]
    user_agent: str
    at: float
    status: int = 0

