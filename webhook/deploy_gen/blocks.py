"""The generated blocks of a hand-written file: the lines between a `begin NAME` marker
comment and its `end NAME`, replaced by their generated text at the marker's indentation.

A marker is a YAML comment (`# begin NAME: ...`) or a Helm template comment that trims the
newline before it (`{{- /* begin NAME: ... */}}`), so the chart renders as if it were not
there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

NOTICE = "generated from the kind registry by `make generate`"
_MARKER = re.compile(r"^(?P<indent> *)(?P<open>#|\{\{- /\*) (?P<edge>begin|end) "
                     r"(?P<name>[a-z-]+)\b")


class BlockError(ValueError):
    """A file's markers do not fit the blocks it should have."""


def begin_marker(indent: str, style: str, name: str) -> str:
    """The line that opens block `name` in a file of `style` ("yaml" or "helm")."""
    if style == "helm":
        return f"{indent}{{{{- /* begin {name}: {NOTICE} */}}}}"
    return f"{indent}# begin {name}: {NOTICE}"


def end_marker(indent: str, style: str, name: str) -> str:
    """The line that closes block `name`."""
    return f"{indent}{{{{- /* end {name} */}}}}" if style == "helm" else f"{indent}# end {name}"


def fill(text: str, blocks: Mapping[str, Sequence[str]], where: str) -> str:
    """`text` with each marked block's lines replaced by `blocks[name]`, indented like its
    begin marker. Every block of `blocks` must be marked (some more than once) and every
    marked block known; `where` names the file in errors."""
    out: list[str] = []
    lines = text.splitlines()
    seen: set[str] = set()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        match = _MARKER.match(line)
        if match is None:
            out.append(line)
            continue
        name, indent = match["name"], match["indent"]
        style = "helm" if match["open"] != "#" else "yaml"
        if match["edge"] == "end" or name not in blocks:
            raise BlockError(f"{where}:{index}: unexpected marker {match['edge']} {name} "
                             f"(blocks here: {', '.join(blocks)})")
        end = _end_of(lines, index, name, where)
        out.append(begin_marker(indent, style, name))
        out += [f"{indent}{block_line}" if block_line else "" for block_line in blocks[name]]
        out.append(end_marker(indent, style, name))
        seen.add(name)
        index = end + 1
    missing = [name for name in blocks if name not in seen]
    if missing:
        raise BlockError(f"{where}: no marked block {', '.join(missing)} (a line "
                         f"`# begin NAME: ...` or `{{{{- /* begin NAME: ... */}}}}` and its end)")
    return "\n".join(out) + "\n"


def _end_of(lines: Sequence[str], start: int, name: str, where: str) -> int:
    for index in range(start, len(lines)):
        match = _MARKER.match(lines[index])
        if match:
            if match["edge"] == "end" and match["name"] == name:
                return index
            raise BlockError(f"{where}:{index + 1}: {match['edge']} {match['name']} inside "
                             f"block {name}")
    raise BlockError(f"{where}:{start}: block {name} has no end marker")
