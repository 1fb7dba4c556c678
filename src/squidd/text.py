"""Text hygiene at the edges: what enters squidd (a channel's message, a model's output)
is made valid Unicode text before the store or the model sees it.

Python strings may hold what UTF-8 cannot encode: an unpaired surrogate (`"\\ud800"`, which
a JSON `\\ud800` escape decodes to, e.g. in an end-to-end encrypted Matrix event the
homeserver could not check) makes every later `json.dumps(...).encode()` and every write of
the history fail. NUL bytes are legal UTF-8 but break C-string consumers and some model
endpoints. `clean_text` replaces both with U+FFFD, so the text stays readable and its
length barely changes; a surrogate *pair* (two code points that belong together) is joined
into the one character it encodes.
"""

from __future__ import annotations

import re

__all__ = ["REPLACEMENT", "clean_text", "utf8"]

REPLACEMENT = "\ufffd"
_BAD = re.compile("[\ud800-\udfff\x00]")


def clean_text(text: str) -> str:
    """`text` with surrogate pairs joined, and lone surrogates and NULs replaced by U+FFFD."""
    if _BAD.search(text) is None:
        return text  # the common case: nothing to do, no copy
    # UTF-16 with surrogatepass writes a pair as the two code units it is; decoding joins
    # it into one character and turns a lone unit into U+FFFD.
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return joined.replace("\x00", REPLACEMENT)


def utf8(text: str) -> bytes:
    """`text` as UTF-8; lone surrogates become U+FFFD instead of failing the write."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return fixed.encode("utf-8")
