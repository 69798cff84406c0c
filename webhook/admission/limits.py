"""The bounds on a request body, and the JSON body of every error answer.

The worker (worker.py) enforces the byte limits while it reads a body off the socket; the
app (app.py) enforces them again on `wsgi.input`, because gthread, sync and the test
client hand it bodies nobody bounded, and it alone bounds the JSON values. Both answer an
error with `error_body`.
"""

from __future__ import annotations

import orjson

MAX_BODY_BYTES = 3 * 1024 * 1024  # the API server's own request limit is 3 MiB
# Read (and drop) this much of a too-large body so the client sees the 413 instead of a
# reset connection; past it, the connection is dropped.
DRAIN_LIMIT = 16 * 1024 * 1024
# Larger bodies are read and parsed a few at a time (a pod's review is 3-20 KiB).
LARGE_BODY_BYTES = 64 * 1024
# Parsing costs about 1 µs and 80 bytes per JSON value and cannot be interrupted: a 3 MiB
# body of `[]` would hold the worker for ~0.3 s and ~90 MB. A real pod's review has a few
# hundred values; a Deployment at etcd's 1.5 MiB object limit, with its old copy, at most
# ~200,000 (env lists of 3 values per 25 bytes).
MAX_JSON_VALUES = 200_000

TOO_LARGE = f"body exceeds the {MAX_BODY_BYTES}-byte limit"


def error_body(status: int, message: str) -> bytes:
    """The JSON body of an error answer: `{"error": message, "code": status}`."""
    return orjson.dumps({"error": message, "code": status})


def json_values_at_most(raw: bytes) -> int:
    """An upper bound of the number of values in JSON text, found without parsing it.

    The values are the root plus, in each non-empty container, its commas plus one: at
    most 1 + commas + containers. Counting `,`, `[` and `{` bytes (inside strings too,
    which only overcounts) bounds it at the speed of a memory scan.
    """
    if len(raw) <= MAX_JSON_VALUES:  # every value takes at least one byte
        return len(raw)
    return raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1
