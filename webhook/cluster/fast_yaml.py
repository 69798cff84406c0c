"""Large YAML state files read by rapidyaml, where it reads them as PyYAML does.

PyYAML, even with libyaml's parser, builds a Python node for every scalar before it
builds the objects: 10,000 pods take seconds and hundreds of MB, where `json` reads the
same state in a tenth of a second. rapidyaml (the `rapidyaml` wheel, module `ryml`)
parses in C++ and writes the tree out as JSON, which `json` reads.

The two do not resolve every plain (unquoted) scalar alike: PyYAML follows YAML 1.1
(`yes`, `~`, `0x10`, `1_000`, unquoted timestamps are not strings), rapidyaml reads
`1e30` as a number where YAML 1.1 reads a string. `kubectl get -o yaml` quotes every
string that could be read as something else, so its output has none of these; a file
that does (or uses anchors, aliases, tags, merge keys or complex keys, which the JSON
form cannot carry) is left to PyYAML, which reads it as it always has. So does a file
rapidyaml cannot parse (PyYAML then names the line) or whose mappings repeat a key (the
caller refuses it, or cuts objects written one after another without `---`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

try:
    import ryml
except ImportError:  # pragma: no cover - a platform without the wheel reads with PyYAML
    ryml = None

# Plain scalars that PyYAML (YAML 1.1) does not read as a string but rapidyaml's JSON
# does: bools and nulls other than true/false/null, ints in other bases or with `_` or
# `+`, sexagesimal numbers, timestamps, the merge and value keys.
_YAML11_ONLY = (
    r"yes|Yes|YES|no|No|NO|True|TRUE|False|FALSE|on|On|ON|off|Off|OFF|~|Null|NULL"
    r"|[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?0x[0-9a-fA-F_]+|\+[0-9][0-9_]*(?:\.[0-9_]*)?"
    r"|[-+]?[0-9][0-9_]*_[0-9_]*(?:\.[0-9_]*)?|[-+]?[0-9][0-9_]*\.[0-9_]*_[0-9_]*"
    r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"
    # infinities and NaNs, and the words rapidyaml rewrites as them (`nan` as `.nan`)
    r"|[-+]?\.?(?:inf|Inf|INF|nan|NaN|NAN|infinity|Infinity)"
    r"|[0-9]{4}-[0-9][0-9]?-[0-9][0-9]?.*|<<|="
)
_SCALAR_END = r"[ \t]*(?:$|#|[,\]}]|:(?:[ \t]|$))"
# A key PyYAML reads as other than a string (`1: x`, `true: x`), which JSON cannot keep.
_TYPED_KEY = r"(?:[-+]?[0-9.][0-9a-zA-Z_:.+\-]*|true|false|null)[ \t]*:(?:[ \t]|$)"
# Anchors, aliases and tags where a node starts (after `: `, `- `, indentation or in
# flow; not `&&` or a glob inside a scalar), the reserved `%`, `@` and backquote there
# (PyYAML refuses them, rapidyaml does not), complex keys and `%` directives.
_STRUCTURE = (r"(?:(?<=[:\-\s,\[{?][ \t])|(?<=[\[{,\n]))(?:[&*!](?![\s&])|[%@`])"
              r"|(?<=\n)%|\A%|\?(?:[ \t]|$)")
# Every such form starts a plain scalar: after whitespace, `[`, `{` or `,` (or the text's
# start). The leading lookahead lets the scan skip other characters quickly.
_NOT_AS_PYYAML = re.compile(
    rf"(?=[~<=&*!%@`?yYnNoOtTfFiI0-9+.\-])(?<![^\s\[{{,])"
    rf"(?:(?:{_YAML11_ONLY}){_SCALAR_END}|{_TYPED_KEY}|{_STRUCTURE})", re.MULTILINE)
# The floats YAML 1.1 reads (PyYAML's resolver): rapidyaml's others (`1e30`) are strings.
_YAML11_FLOAT = re.compile(r"-?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*)(?:[eE][-+][0-9]+)?")


class _NotAsPyYaml(Exception):
    """rapidyaml's reading would differ from PyYAML's: read the text with PyYAML."""


def fast_documents(text: str, object_hook: Callable[[list[tuple[str, Any]]], Any]
                   ) -> list[Any] | None:
    """The YAML documents of `text` as PyYAML reads them, or None when this reader cannot
    tell that it reads them alike (no rapidyaml, a form above, a parse error): then the
    caller reads `text` with PyYAML. `object_hook` builds each mapping from its pairs
    (it may raise ValueError on a repeated key: the text then goes to PyYAML too)."""
    if ryml is None or _NOT_AS_PYYAML.search(text):
        return None
    try:
        with _quiet_stderr():  # rapidyaml prints its parse errors; PyYAML's say it better
            tree = ryml.parse_in_arena(text.encode("utf-8"))
    except Exception:  # ryml raises its own types; PyYAML then names the error
        return None
    if tree.size() == 0:
        return []
    root = tree.root_id()
    roots = list(ryml.children(tree, root)) if tree.is_stream(root) else [root]
    documents = []
    try:
        for node in roots:
            emitted = ryml.emit_json(tree, node)
            if emitted is None:
                continue
            documents.append(json.loads(emitted, object_pairs_hook=object_hook,
                                        parse_float=_yaml11_float,
                                        parse_constant=_not_yaml11))
    except (ValueError, _NotAsPyYaml):
        return None
    return [doc for doc in documents if doc is not None]


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 pointed at /dev/null meanwhile (what C++ code writes there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _not_yaml11(text: str) -> Any:
    """NaN and Infinity, which YAML 1.1 reads as strings (`.nan` and `.inf` are its)."""
    raise _NotAsPyYaml(text)


def _yaml11_float(text: str) -> float:
    if not _YAML11_FLOAT.fullmatch(text):
        raise _NotAsPyYaml(text)
    return float(text.replace("_", ""))
