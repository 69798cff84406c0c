"""Long messages as warnings: one line per thought, cut at a clause when too long."""

from __future__ import annotations

import textwrap
import unicodedata

_CONJUNCTIONS = ("while ", "so ", "because ", "where ", "then ")


def _clauses(text: str) -> list[str]:
    """`text` cut outside parentheses after ". ", "; " and ", ", and before a conjunction."""
    clauses: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]" and depth:
            depth -= 1
        elif depth:
            continue
        elif char in ".;," and text.startswith(" ", index + 1):
            clauses.append(text[start:index + 2])
            start = index + 2
        elif (char == " " and index + 1 > start
              and text.startswith(_CONJUNCTIONS, index + 1)):
            clauses.append(text[start:index + 1])
            start = index + 1
    if start < len(text):
        clauses.append(text[start:])
    return clauses


_CLIPPED = " ..."


def warning_texts(texts: list[str], limit: int, total: int) -> list[str]:
    """One warning per text, each a single line of at most `limit` characters, together at
    most `total`: the API server's rules for an admission response's warnings.

    A warning is one thought: kubectl prints each as its own `Warning:` line, so a thought
    split over two would read as two. A text longer than `limit` is cut after its last
    clause that fits (a word, when one clause alone is too long) and ends in " ...".
    Control characters, which the API server refuses in a warning, become spaces. Texts
    past `total` are left out rather than cut by the API server.
    """
    out: list[str] = []
    used = 0
    for text in texts:
        line = _one_line(text, limit)
        if not line:
            continue
        if used + len(line) > total:
            break
        out.append(line)
        used += len(line)
    return out


def _one_line(text: str, limit: int) -> str:
    plain = " ".join("".join(" " if unicodedata.category(c).startswith("C") else c
                             for c in text).split())
    if len(plain) <= limit:
        return plain
    room = limit - len(_CLIPPED)
    kept = ""
    for clause in _clauses(plain):
        if len(kept) + len(clause.rstrip()) > room:
            break
        kept += clause
    if not kept.strip():
        kept = textwrap.shorten(plain, room, placeholder="")
    return kept.rstrip(" ,;:.") + _CLIPPED
