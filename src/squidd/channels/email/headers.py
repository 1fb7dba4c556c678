"""Reading a mail's header block: what the policy checks and what replies thread on.

Only the header block is parsed (it is fetched before the body, so a mail over the size
cap is judged without downloading it). Headers are hostile input: raw 8-bit bytes in any
charset, encoded words that lie about theirs or do not decode, NULs and controls, fields of
megabytes. Every value is read raw and made into printable text by `charsets.header_text`
(valid Unicode, no controls, capped), so what leaves this module is always clean. The
standard `email` parser is used for the structure of the From field only (who sent it
decides who is answered, so its careful address grammar is kept); a From too long for that
parser is not read.

`MIME_POLICY` is `policy.default` made safe for hostile headers, for every parse of a mail:
the standard header parser's cost grows with the square of a field's length (a 100 kB
Content-Type took 40 s, even to find the body's parts) and nested comments exhaust its
recursion, so a field is parsed from its first `_MAX_PARSED` characters, and one the parser
fails on reads as empty.

Message ids are kept only when they are valid `msg-id`s (RFC 5322): a reply copies them
into its own References, and junk there must not become an encoded word in a reply.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from email.message import Message
from email.parser import BytesParser
from email.policy import EmailPolicy
from email.utils import getaddresses
from typing import Any

from squidd.channels.email.charsets import decode, header_text, to_bytes

__all__ = [
    "MIME_POLICY",
    "MSGID_RE",
    "MailHeaders",
    "derived_id",
    "header_block",
    "parse_headers",
    "valid_msgids",
]

_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_DOT_ATOM = rf"{_ATEXT}+(?:\.{_ATEXT}+)*"
MSGID_RE = re.compile(rf"<{_DOT_ATOM}@(?:{_DOT_ATOM}|\[[!-Z^-~]*\])>")
"""A valid msg-id (RFC 5322 3.6.4, without the obsolete forms)."""
_MAX_MSGID = 250
_ANY_MSGID_RE = re.compile(r"<[^<>\s]{1,900}>")
_MAX_SUBJECT = 1000
_BAD_ADDRESS_RE = re.compile("[\x00-\x20\x7f-\x9f\ufffd\ud800-\udfff]")
_MAX_ADDRESS_FIELD = 4096
_MAX_LONG_FIELD = 64 * 1024
_MAX_PARSED = 8 * 1024


class _TolerantPolicy(EmailPolicy):
    """`policy.default` with a bound on what one field costs (see the module docstring)."""

    def header_fetch_parse(self, name: str, value: str) -> Any:
        if isinstance(value, str) and len(value) > _MAX_PARSED:
            value = value[:_MAX_PARSED]
        try:
            return super().header_fetch_parse(name, value)
        except Exception:  # noqa: BLE001 - RecursionError on nested comments, parser defects
            return super().header_fetch_parse(name, "")


MIME_POLICY = _TolerantPolicy()


@dataclass(frozen=True, slots=True)
class MailHeaders:
    """The header fields squidd decides and threads on (already decoded)."""

    message_id: str
    """The first `<...>` of Message-ID, or a stable id derived from the header block."""
    has_message_id: bool
    """Message-ID holds a valid msg-id (one a reply may thread on)."""
    from_addr: str
    """Lower-cased addr-spec of the single From address; empty when absent or ambiguous."""
    from_name: str
    from_count: int
    subject: str
    references: tuple[str, ...]
    in_reply_to: str
    auto_submitted: str
    precedence: str
    has_list_id: bool
    return_path: str | None
    auth_results: tuple[str, ...]
    """Authentication-Results fields, topmost (most recently added) first."""
    content_type: str
    autoreply_marked: bool
    """X-Autoreply / X-Autorespond / X-Auto-Response-Suppress style markers of robots."""
    trace: tuple[tuple[str, str], ...] = ()
    """`("received" | "authentication-results", value)` in header order, topmost first:
    where each verdict stands relative to the hops that added it."""
    from_too_long: bool = False
    """The From field was too long to be read (no sender, so the mail is not answered)."""
    recipients: tuple[str, ...] = ()
    """The lower-cased addresses of To, Cc and Delivered-To (at most 50): which of the
    account's addresses the mail was sent to (plus-addressing routes it to an agent)."""


def valid_msgids(text: str) -> tuple[str, ...]:
    """The valid msg-ids in `text`, in order, without repeats; one that holds `=?` (the
    start of an encoded word: a reader may decode it) is not taken."""
    out: list[str] = []
    for found in MSGID_RE.findall(text):
        if len(found) <= _MAX_MSGID and "=?" not in found and found not in out:
            out.append(found)
    return tuple(out)


def _raw_values(msg: Message, name: str) -> list[str]:
    """Every raw value of the field `name`, as the parser read it (8-bit bytes escaped)."""
    wanted = name.lower()
    out: list[str] = []
    for key, value in msg.raw_items():
        if key.lower() == wanted:
            out.append(str(value))
    return out


def _header(msg: Message, name: str, *, max_chars: int = _MAX_SUBJECT) -> str:
    """The first field `name` as printable text; '' when absent."""
    values = _raw_values(msg, name)
    return header_text(values[0], max_chars=max_chars) if values else ""


def _all_headers(msg: Message, name: str) -> tuple[str, ...]:
    return tuple(header_text(v, max_chars=_MAX_LONG_FIELD) for v in _raw_values(msg, name))


_TRACE_FIELDS = frozenset({"received", "authentication-results"})


def _trace(msg: Message) -> tuple[tuple[str, str], ...]:
    return tuple(
        (key.lower(), header_text(str(value), max_chars=_MAX_LONG_FIELD))
        for key, value in msg.raw_items()
        if key.lower() in _TRACE_FIELDS
    )


def _address_text(addr: str) -> str:
    """An addr-spec as the parser gave it (8-bit bytes escaped) as text: an internationalised
    address in raw UTF-8 (RFC 6532) reads as itself. One with a control, a space or an
    undecodable part is no address ('') rather than a cleaned one that might match another."""
    text = decode(to_bytes(addr.strip()))
    return "" if _BAD_ADDRESS_RE.search(text) else text.lower()


def _from_field(msg: Message) -> tuple[list[tuple[str, str]], bool]:
    """(display name, addr-spec) of every address in From, and whether From was too long.

    The addresses come from the standard parser's reading of the field (a display name
    cannot pose as an address there); the display name is decoded from the raw field.
    """
    raw = _raw_values(msg, "From")
    if not raw:
        return [], False
    if sum(len(v) for v in raw) > _MAX_ADDRESS_FIELD:
        return [], True
    try:
        parsed = [str(v) for v in msg.get_all("From") or []]
    except Exception:  # noqa: BLE001 - the email package raises many types on hostile headers
        return [], False
    addrs = [_address_text(a) for _, a in getaddresses(parsed)]
    addrs = [a for a in addrs if "@" in a]
    if len(addrs) != 1:
        return [("", a) for a in addrs], False
    names = [n for n, a in getaddresses(raw) if _address_text(a) == addrs[0]]
    name = header_text(names[0], max_chars=200) if len(names) == 1 else ""
    return [(name, addrs[0])], False


def derived_id(header_block: bytes) -> str:
    """A stable id for a mail without Message-ID: the same header bytes give the same id."""
    digest = hashlib.sha256(header_block).hexdigest()[:40]
    return f"<derived.{digest}@squidd.invalid>"


def header_block(raw: bytes) -> bytes:
    """The header part of a raw message (up to the first empty line)."""
    for sep in (b"\r\n\r\n", b"\n\n"):
        index = raw.find(sep)
        if index >= 0:
            return raw[: index + len(sep)]
    return raw


def _message_id(msg: Message, block: bytes) -> tuple[str, bool]:
    """(the mail's stable id, whether it is a valid msg-id a reply may thread on)."""
    raw = _header(msg, "Message-ID", max_chars=_MAX_LONG_FIELD)
    valid = valid_msgids(raw)
    if valid:
        return valid[0], True
    # Kept as the mail's id (what redeliveries are recognised by), never threaded on.
    loose = _ANY_MSGID_RE.findall(raw)
    return (loose[0] if loose else derived_id(block)), False


def parse_headers(raw_headers: bytes) -> MailHeaders:
    """Parse a header block (or a whole message: only its headers are looked at)."""
    block = header_block(raw_headers)
    msg = BytesParser(policy=MIME_POLICY).parsebytes(block, headersonly=True)
    message_id, has_message_id = _message_id(msg, block)
    from_list, from_too_long = _from_field(msg)
    from_name, from_addr = from_list[0] if len(from_list) == 1 else ("", "")
    return_path_raw = _header(msg, "Return-Path")
    return_path: str | None = None
    if return_path_raw:
        return_path = return_path_raw.strip().strip("<>").strip().lower()
    robot_markers = ("X-Autoreply", "X-Autorespond", "X-Autoresponder")
    return MailHeaders(
        message_id=message_id,
        has_message_id=has_message_id,
        from_addr=from_addr,
        from_name=from_name,
        from_count=len(from_list),
        subject=_header(msg, "Subject"),
        references=valid_msgids(" ".join(_all_headers(msg, "References")))[-100:],
        in_reply_to=next(iter(valid_msgids(_header(msg, "In-Reply-To"))), ""),
        auto_submitted=_header(msg, "Auto-Submitted").lower(),
        precedence=_header(msg, "Precedence").lower(),
        has_list_id=bool(_header(msg, "List-Id")),
        return_path=return_path,
        auth_results=_all_headers(msg, "Authentication-Results"),
        trace=_trace(msg),
        content_type=_header(msg, "Content-Type").lower(),
        autoreply_marked=any(_header(msg, name) for name in robot_markers),
        from_too_long=from_too_long,
        recipients=_recipients(msg),
    )


def _recipients(msg: Message) -> tuple[str, ...]:
    fields = ("To", "Cc", "Delivered-To", "X-Original-To")
    raw = [v for name in fields for v in _raw_values(msg, name)]
    if sum(len(v) for v in raw) > _MAX_ADDRESS_FIELD * 4:
        return ()
    try:
        parsed = [str(v) for name in fields for v in msg.get_all(name) or []]
    except Exception:  # noqa: BLE001 - the email package raises many types on hostile headers
        return ()
    found = [_address_text(a) for _, a in getaddresses(parsed)]
    return tuple(dict.fromkeys(a for a in found if "@" in a))[:50]
