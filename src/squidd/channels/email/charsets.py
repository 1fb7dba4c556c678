"""Mail bytes to valid text: declared charsets that lie, undeclared 8-bit, RFC 2047 words.

Everything a mail carries arrives as bytes with, at best, a claim about their charset, and
the claim is often wrong: raw 8-bit headers in Latin-1, cp1252 or undeclared UTF-8, a part
labelled `iso-8859-1` whose bytes are UTF-8, charsets nobody knows, encoded-words holding
bytes that are not in their charset (`=?utf-8?b?//4=?=`), base64 that is not, words never
closed. One rule for all of it (`decode`): bytes that are valid UTF-8 (and not plain ASCII)
are UTF-8, whatever the label says (text in a single-byte charset practically never forms
valid multi-byte UTF-8, while a wrong label is common); else the declared charset when it
decodes; else `squidd.text.decode_bytes` (each run of bytes as UTF-8 where it is, cp1252
where it is not, Latin-1 where cp1252 leaves a byte undefined: what every edge uses for
bytes of no known charset). Decoding never fails and never loses a byte.

The result is then cleaned by `squidd.text.clean_text` (the one cleaning function of every
edge), and `header_text` also drops every control character, folds whitespace and caps the
length, so the parsers downstream, the model and the reply composer only ever see valid,
printable text. The standard library's `email` parser is kept for structure; its own
decoding of words and charsets is not used for text, because it leaves surrogate escapes
behind (which then fail a reply's encoding) and raises on some hostile input.
"""

from __future__ import annotations

import binascii
import codecs
import re

from squidd.text import clean_text, decode_bytes

__all__ = ["body_text", "decode", "header_text", "printable", "to_bytes"]

# Labels whose usual meaning in mail is a superset the strict codec refuses (what browsers
# do too): Latin-1 mail is cp1252 in practice, GB2312 mail is GBK/GB18030, and so on.
_SUPERSETS = {
    "iso8859_1": "cp1252",
    "latin_1": "cp1252",
    "ascii": "cp1252",
    "iso8859_9": "cp1254",
    "iso8859_11": "cp874",
    "tis_620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "euc_kr": "cp949",
    "shift_jis": "cp932",
    "big5": "big5hkscs",
}
# Codecs whose bytes may also read as UTF-8 by chance; trusted before the UTF-8 test.
_WIDE = ("utf_16", "utf_32")
_WORD_RE = re.compile(r"=\?([^?\s]{1,80})\?([bBqQ])\?([^?]*)\?=")
_SPACE_RE = re.compile(r"\s+")
# C0 and C1 controls and DEL: never part of a header; in a body only tab and newline stay.
# In a header also the byte-order mark and the bidi embeddings, overrides and isolates: a
# subject is one line shown to a person, and these make it read other than it is.
_HEADER_CONTROLS_RE = re.compile("[\x00-\x1f\x7f-\x9f\ufeff\u202a-\u202e\u2066-\u2069]")
_BODY_CONTROLS_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MAX_RAW_HEADER = 64 * 1024


def _codec(charset: str | None) -> str | None:
    """The Python codec for a mail charset label (RFC 2231 language dropped), or None."""
    if not charset:
        return None
    label = charset.split("*", 1)[0].strip().strip("\"'").lower()
    try:
        name = codecs.lookup(label).name.replace("-", "_")
    except (LookupError, ValueError):
        return None
    return _SUPERSETS.get(name, name)


def decode(data: bytes, charset: str | None = None) -> str:
    """`data` as text, by the rule in the module docstring; never raises."""
    codec = _codec(charset)
    if codec is not None and codec.startswith(_WIDE):
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            codec = None
    if not data.isascii():
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    if codec is not None:
        try:
            return data.decode(codec)
        except (UnicodeDecodeError, LookupError):  # LookupError: a codec that is not text
            pass
    return decode_bytes(data)


def to_bytes(raw: str) -> bytes:
    """A value the standard parser read from bytes (8-bit bytes kept as surrogate escapes)
    back as the bytes it came from."""
    return raw.encode("utf-8", "surrogateescape")


def _word_bytes(encoding: str, payload: str) -> bytes | None:
    """The bytes of an encoded-word's text, or None when it is not valid in its encoding."""
    data = to_bytes(payload)
    if encoding in "bB":
        data = re.sub(rb"\s+", b"", data).rstrip(b"=")
        data += b"=" * (-len(data) % 4)
        try:
            return binascii.a2b_base64(data, strict_mode=True)
        except (binascii.Error, ValueError):
            return None
    return binascii.a2b_qp(data, header=True)


def _pieces(raw: str) -> list[tuple[bytes, str | None]]:
    """(bytes, declared charset or None) runs of a header value, encoded words decoded.

    Whitespace between two adjacent encoded words is not part of the text (RFC 2047 6.2).
    A word that does not decode stays as the raw text it was.
    """
    out: list[tuple[bytes, str | None]] = []
    pos = 0
    after_word = False
    for match in _WORD_RE.finditer(raw):
        between = raw[pos : match.start()]
        data = _word_bytes(match.group(2), match.group(3))
        if not (after_word and data is not None and not between.strip()):
            out.append((to_bytes(between), None))
        if data is None:
            out.append((to_bytes(match.group(0)), None))
            after_word = False
        else:
            out.append((data, match.group(1)))
            after_word = True
        pos = match.end()
    out.append((to_bytes(raw[pos:]), None))
    return out


def printable(text: str, *, max_chars: int) -> str:
    """`text` cleaned, on one line (controls dropped, whitespace folded), cut to `max_chars`
    (with an ellipsis where it was cut)."""
    text = text.replace("\t", " ").replace("\n", " ").replace("\r", " ")
    text = _SPACE_RE.sub(" ", clean_text(_HEADER_CONTROLS_RE.sub("", text))).strip()
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "\u2026"
    return text


def header_text(raw: str, *, max_chars: int = 1000) -> str:
    """A raw header value as printable text: unfolded, encoded words decoded, each run of
    bytes decoded by `decode` (adjacent words of one charset together, so a character split
    across two words joins up), controls dropped, cut to `max_chars`."""
    raw = raw[:_MAX_RAW_HEADER].replace("\r", "").replace("\n", "")
    merged: list[tuple[bytes, str | None]] = []
    for data, charset in _pieces(raw):
        if merged and merged[-1][1] == charset and charset is not None:
            merged[-1] = (merged[-1][0] + data, charset)
        elif data:
            merged.append((data, charset))
    return printable(
        "".join(decode(data, charset) for data, charset in merged), max_chars=max_chars
    )


def body_text(text: str) -> str:
    """Decoded body text cleaned: valid Unicode, no controls but tab and newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return clean_text(_BODY_CONTROLS_RE.sub("", text))
