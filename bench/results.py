"""One table for `make bench`: each benchmark records its figures here.

`record()` prints a figure at once and, when BENCH_RESULTS names a file (make bench
sets it), appends it there as a JSON line; `bench/table.py` prints that file as one
table at the end. Every figure carries what it is judged by (a bound or a ratio) and
whether it meets it (None for figures that are only informative).
"""

from __future__ import annotations

import json
import os


def record(figure: str, value: str, judged_by: str, ok: bool | None = None) -> None:
    """Print and keep one figure: `value` against `judged_by`; `ok` says if it is met."""
    verdict = {True: "met", False: "NOT met", None: ""}[ok]
    print(f"  {figure}: {value}  [{judged_by}] {verdict}".rstrip())
    target = os.environ.get("BENCH_RESULTS")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps({"figure": figure, "value": value, "judged_by": judged_by,
                                  "ok": ok}) + "\n")
