"""The text of a state or policy file: UTF-8, or one error line that says what it is.

A Windows shell's `kubectl get ... > state.yaml` writes UTF-16 (PowerShell 5's `>`), an
editor may save Latin-1, a truncated copy may hold NUL bytes. YAML and JSON files are
UTF-8 here as in Kubernetes; each of these gets one line naming the file, the place and
what to do, instead of a codec message with a byte offset.
"""

from __future__ import annotations

import codecs

from ..errors import InputError

_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_UTF32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)


class UnreadableText(InputError):
    """A file that is not UTF-8 text; the message names the place and the remedy."""


def decode_text(data: bytes, source: str, path: str = "FILE") -> str:
    """`data` (of file `path`) as UTF-8 text (a UTF-8 byte order mark dropped).
    Errors: UnreadableText."""
    encoding = _wide_encoding(data)
    if encoding is not None:
        raise UnreadableText(
            f"{source}: it is {encoding} text, and poolguard reads UTF-8 (as kubectl writes "
            f"it); convert it: iconv -f {encoding} -t UTF-8 {path} > {path}.utf8 (PowerShell: "
            f"kubectl ... | Out-File -Encoding utf8 {path})")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        start = err.start + (3 if data.startswith(codecs.BOM_UTF8) else 0)
        line, column = place_of(data, start)
        raise UnreadableText(
            f"{source}: line {line}, column {column}: byte 0x{data[start]:02x} is not UTF-8 "
            "(a file saved in another encoding, such as Latin-1?); save it as UTF-8, e.g. "
            f"iconv -f LATIN1 -t UTF-8 {path} > {path}.utf8") from None
    refuse_nul(text, source)
    return text


def refuse_nul(text: str, source: str) -> None:
    """A NUL character, which neither YAML nor JSON allows (a binary or damaged file)."""
    position = text.find("\0")
    if position >= 0:
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        raise UnreadableText(f"{source}: line {line}, column {column}: a NUL byte, which YAML "
                             "and JSON do not allow (a binary, damaged or UTF-16 file?)")


def place_of(data: bytes, offset: int) -> tuple[int, int]:
    """(line, column) of byte `offset`, both from 1; the column counts characters."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    column = len(data[line_start:offset].decode("utf-8", errors="replace")) + 1
    return data.count(b"\n", 0, offset) + 1, column


def _wide_encoding(data: bytes) -> str | None:
    """UTF-16 or UTF-32 by their byte order mark, or UTF-16 without one (every other byte
    NUL in the first characters of ASCII text)."""
    if data.startswith(_UTF32_BOMS):
        return "UTF-32"
    if data.startswith(_UTF16_BOMS):
        return "UTF-16"
    head = data[:64]
    if len(head) >= 4 and (head[1::2].count(0) == len(head[1::2])
                           or head[0::2].count(0) == len(head[0::2])):
        return "UTF-16"
    return None
