"""Long messages as lines: split at clause boundaries, or one warning per thought."""

from __future__ import annotations

import textwrap
import unicodedata

_CONTINUATION = "... "


def split_at_clauses(text: str, width: int) -> list[str]:
    """`text` on lines of at most `width` characters, broken after "; " or ", " first.

    Breaks fall between clauses, never inside parentheses (a pod's "(node n, pool p)"
    stays whole); words are split only when one clause alone is longer than a line.
    Lines after the first start with "... ".
    """
    clauses = _clauses(" ".join(text.split()))
    lines: list[str] = []
    current = ""
    for clause in clauses:
        room = width - (len(_CONTINUATION) if lines else 0)
        if current and len(current) + len(clause) <= room:
            current += clause
            continue
        if current:
            lines.append(current.rstrip())
            room = width - len(_CONTINUATION)
        if len(clause) <= room:
            current = clause
            continue
        # One clause longer than a line: words it is, continuation lines marked.
        first_indent = _CONTINUATION if lines else ""
        wrapped = [line.removeprefix(_CONTINUATION) if i or lines else line for i, line in
                   enumerate(textwrap.wrap(clause, width, initial_indent=first_indent,
                                           subsequent_indent=_CONTINUATION,
                                           break_on_hyphens=False))]
        lines.extend(wrapped[:-1])
        current = wrapped[-1] + " " if clause.endswith(" ") else wrapped[-1]
    if current.strip():
        lines.append(current.rstrip())
    return [line if i == 0 else _CONTINUATION + line for i, line in enumerate(lines)]


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
