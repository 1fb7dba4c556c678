"""Reading a mail's header block: what the policy checks and what replies thread on.

Only the header block is parsed (it is fetched before the body, so a mail over the size
cap is judged without downloading it), through the standard `email` package with
`policy.default` (RFC 2047 words, charsets). Headers are hostile input: every field
tolerates malformed values and unknown charsets and degrades to "less text" rather than an
exception. Where an encoded word does not decode (U+FFFD where the raw field had none),
the raw text is shown instead.

`raw_text`, `CONTROL_RE` and `header_block` are shared with `body`, which shows raw text
the same way where the MIME decoding of a body fails.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from email import policy
from email.message import Message
from email.parser import BytesParser
from email.utils import getaddresses

__all__ = [
    "CONTROL_RE",
    "MailHeaders",
    "derived_id",
    "header_block",
    "parse_headers",
    "raw_text",
]

_MSGID_RE = re.compile(r"<[^<>\s]{1,900}>")
_FOLD_RE = re.compile(r"\r?\n[ \t]+")
CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""Control characters other than tab and newline: never shown to the model."""


@dataclass(frozen=True, slots=True)
class MailHeaders:
    """The header fields squidd decides and threads on (already decoded)."""

    message_id: str
    """The first `<...>` of Message-ID, or a stable id derived from the header block."""
    has_message_id: bool
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


def raw_text(raw: str) -> str:
    """A raw header value (8-bit bytes kept as surrogates by the parser) as readable text."""
    data = _FOLD_RE.sub(" ", raw).encode("utf-8", "surrogateescape")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _raw_header(msg: Message, name: str) -> str | None:
    try:
        for key, value in msg.raw_items():
            if key.lower() == name.lower():
                return str(value)
    except Exception:  # noqa: BLE001 - see _header
        return None
    return None


def _header(msg: Message, name: str) -> str:
    """A header as decoded text; the raw text where decoding fails; '' when absent."""
    try:
        value = msg.get(name)
    except Exception:  # noqa: BLE001 - the email package raises many types on hostile headers
        value = None
    if value is None:
        return ""
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - same: a broken encoded-word must not stop the mail
        text = "\ufffd"
    if "\ufffd" in text:
        raw = _raw_header(msg, name)
        if raw is not None and "\ufffd" not in (shown := raw_text(raw)):
            text = shown
        elif text == "\ufffd":
            return ""
    return CONTROL_RE.sub(" ", text).strip()


def _all_headers(msg: Message, name: str) -> tuple[str, ...]:
    try:
        values = msg.get_all(name) or []
    except Exception:  # noqa: BLE001 - see _header
        return ()
    out = []
    for value in values:
        try:
            out.append(CONTROL_RE.sub(" ", str(value)).strip())
        except Exception:  # noqa: BLE001, S112 - skip one undecodable field, keep the rest
            continue
    return tuple(out)


_TRACE_FIELDS = frozenset({"received", "authentication-results"})


def _trace(msg: Message) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    try:
        items = msg.items()
    except Exception:  # noqa: BLE001 - see _header
        return ()
    for name, value in items:
        lowered = name.lower()
        if lowered not in _TRACE_FIELDS:
            continue
        try:
            out.append((lowered, CONTROL_RE.sub(" ", str(value)).strip()))
        except Exception:  # noqa: BLE001, S112 - skip one undecodable field, keep the rest
            continue
    return tuple(out)


def _addresses(msg: Message, name: str) -> list[tuple[str, str]]:
    """(display name, lower-cased addr-spec) of every address in the field."""
    raw = _all_headers(msg, name)
    if not raw:
        return []
    pairs = getaddresses(list(raw))
    return [(n.strip(), a.strip().lower()) for n, a in pairs if a and "@" in a]


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


def parse_headers(raw_headers: bytes) -> MailHeaders:
    """Parse a header block (or a whole message: only its headers are looked at)."""
    block = header_block(raw_headers)
    msg = BytesParser(policy=policy.default).parsebytes(block, headersonly=True)
    message_ids = _MSGID_RE.findall(_header(msg, "Message-ID"))
    from_list = _addresses(msg, "From")
    from_name, from_addr = from_list[0] if len(from_list) == 1 else ("", "")
    return_path_raw = _header(msg, "Return-Path")
    return_path: str | None = None
    if return_path_raw:
        return_path = return_path_raw.strip().strip("<>").strip().lower()
    robot_markers = ("X-Autoreply", "X-Autorespond", "X-Autoresponder")
    return MailHeaders(
        message_id=message_ids[0] if message_ids else derived_id(block),
        has_message_id=bool(message_ids),
        from_addr=from_addr,
        from_name=from_name,
        from_count=len(from_list),
        subject=_header(msg, "Subject"),
        references=tuple(_MSGID_RE.findall(" ".join(_all_headers(msg, "References")))),
        in_reply_to=next(iter(_MSGID_RE.findall(_header(msg, "In-Reply-To"))), ""),
        auto_submitted=_header(msg, "Auto-Submitted").lower(),
        precedence=_header(msg, "Precedence").lower(),
        has_list_id=bool(_header(msg, "List-Id")),
        return_path=return_path,
        auth_results=_all_headers(msg, "Authentication-Results"),
        trace=_trace(msg),
        content_type=_header(msg, "Content-Type").lower(),
        autoreply_marked=any(_header(msg, name) for name in robot_markers),
    )
