"""Text hygiene at the edges: what enters squidd (a channel's message, a model's output, an
MCP server's or a web page's answer, a file name) is made valid Unicode text before the
store, the logs or the model see it. `clean_text` is the one function every edge calls.

Python strings may hold what UTF-8 cannot encode: an unpaired surrogate (`"\\ud800"`, which
a JSON `\\ud800` escape decodes to, e.g. in an end-to-end encrypted Matrix event the
homeserver could not check) makes every later `json.dumps(...).encode()` and every write of
the history fail; a *surrogate escape* (`"\\udcff"`, what `errors="surrogateescape"` makes
of a byte that was not valid in the charset it was read with: the stdlib email parser's raw
8-bit headers, `os.fsdecode` of a file name) fails the same way. NUL and the other control
characters are legal UTF-8 but break C-string consumers, terminals and some model
endpoints, and carry nothing a reader needs.

`clean_text`:
- joins a surrogate *pair* (two code points that belong together) into the one character it
  encodes;
- turns a run of surrogate escapes back into its bytes and decodes them as UTF-8, and what
  is not UTF-8 as cp1252, and what cp1252 leaves undefined as Latin-1 (so raw 8-bit text in
  any of the usual Western encodings reads right, and nothing is lost);
- replaces any other lone surrogate with U+FFFD;
- drops NUL and every other control character (C0, DEL, C1) except tab, newline and
  carriage return.
The result encodes as UTF-8, always.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REPLACEMENT", "clean_data", "clean_text", "decode_bytes", "utf8"]

REPLACEMENT = "\ufffd"
_CONTROLS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
_BAD = re.compile(f"[\ud800-\udfff{_CONTROLS}]")
_CONTROL = re.compile(f"[{_CONTROLS}]")
# A surrogate pair, a run of surrogate escapes (bytes 0x80-0xff), or any other lone surrogate.
_SURROGATES = re.compile("([\ud800-\udbff][\udc00-\udfff])|([\udc80-\udcff]+)|[\ud800-\udfff]")
_MAX_DEPTH = 64


def clean_text(text: str) -> str:
    """`text` as valid Unicode text: surrogate pairs joined, surrogate escapes decoded, other
    lone surrogates replaced by U+FFFD, NUL and control characters other than tab, newline
    and carriage return dropped."""
    if _BAD.search(text) is None:
        return text  # the common case: nothing to do, no copy
    return _CONTROL.sub("", _SURROGATES.sub(_fix_surrogates, text))


def clean_data(value: Any, _depth: int = 0) -> Any:
    """A parsed JSON value (a Matrix event's content, an MCP schema) with `clean_text`
    applied to every string in it, keys included; containers nested deeper than 64 levels
    (no protocol needs them; they only serve to exhaust the stack) become None."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict | list | tuple) and _depth >= _MAX_DEPTH:
        return None
    if isinstance(value, dict):
        return {clean_data(k, _depth): clean_data(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_data(item, _depth + 1) for item in value]
    return value


def _fix_surrogates(match: re.Match[str]) -> str:
    pair, escapes = match.group(1), match.group(2)
    if pair is not None:
        # UTF-16 with surrogatepass writes the pair as the two code units it is; decoding
        # joins it into the one character.
        return pair.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    if escapes is not None:
        return decode_bytes(escapes.encode("utf-8", "surrogateescape"))
    return REPLACEMENT


def decode_bytes(data: bytes) -> str:
    """Bytes of an unknown or untrustworthy charset as text: UTF-8 where they are UTF-8,
    each other byte as cp1252, or Latin-1 where cp1252 leaves it undefined. Never fails,
    never drops a byte, linear in the length; the control characters it may yield are left
    to `clean_text`."""
    return data.decode("utf-8", "surrogateescape").translate(_ESCAPED_BYTE)


def _escaped_byte_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for byte in range(0x80, 0x100):
        try:
            table[0xDC00 + byte] = bytes([byte]).decode("cp1252")
        except UnicodeDecodeError:
            table[0xDC00 + byte] = chr(byte)
    return table


_ESCAPED_BYTE = _escaped_byte_table()


def utf8(text: str) -> bytes:
    """`text` as UTF-8; lone surrogates become U+FFFD instead of failing the write."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return fixed.encode("utf-8")
