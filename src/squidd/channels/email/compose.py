"""Building the outgoing mail: threading headers, a derived Message-ID, text and HTML parts.

A reply's Message-ID is derived from the inbound Message-ID, so a reply sent again after a
crash is recognisably the same mail (same id: clients and servers collapse duplicates).
The HTML part is rendered from the model's markdown and sanitised; the plain part is the
markdown itself, which reads fine as text. The reply's files follow as attachments.

Whatever the mail it answers held, the reply's headers are valid: its subject is printable
text on one line (controls dropped, cut to `_MAX_SUBJECT`), and a subject holding text that
looks like an RFC 2047 encoded word is written encoded, so the recipient reads exactly that
text (written as it is, their client would decode it); so is any subject beyond ASCII or
too long for one line (the standard folder adds a space where it folds some of them). The
words are short enough that no line needs folding again. In-Reply-To and References carry
valid msg-ids only, never an encoded word.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from functools import cache
from typing import TYPE_CHECKING

from squidd.channels.email.charsets import printable
from squidd.channels.email.headers import valid_msgids

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

_RE_PREFIX = re.compile(r"^\s*((re|aw|sv|antw)(\[\d+\])?\s*:\s*)+", re.IGNORECASE)
_MAX_REFERENCES = 20
_MAX_SUBJECT = 200
_UNFOLDED = 78 - len("Subject: ")
_WORD_BYTES = 39  # 52 base64 characters: `Subject: ` and the word stay within 78 (no refold)


@cache
def _markdown() -> MarkdownIt:
    """Built at the first reply: markdown-it (and nh3) load then, not at the channel's start
    (docs/performance.md)."""
    from markdown_it import MarkdownIt

    markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    return markdown.enable(["table", "strikethrough"])


@dataclass(frozen=True, slots=True)
class FilePart:
    """A file to attach: its name (display only), MIME type and bytes."""

    name: str
    mime: str
    data: bytes


@dataclass(frozen=True, slots=True)
class ThreadContext:
    """What a reply needs to know about the mail it answers."""

    source_id: str
    """The inbound's stable id (its Message-ID, or one derived when it had none)."""
    message_id: str
    """The inbound's real Message-ID; empty when it had none (nothing to thread on)."""
    subject: str
    references: Sequence[str]


def reply_subject(subject: str) -> str:
    """`Re: <subject>`, without stacking `Re: Re:` (or `AW:`/`SV:`) prefixes."""
    base = _RE_PREFIX.sub("", printable(subject, max_chars=_MAX_SUBJECT)).strip()
    return printable(f"Re: {base}", max_chars=_MAX_SUBJECT) if base else "Re: your message"


def encoded_words(text: str) -> str:
    """`text` as RFC 2047 base64 words, one per folded line. Every character, spaces
    included, is inside a word (a reader drops the whitespace between two words), and no
    character is split across two words."""
    words: list[str] = []
    chunk = b""
    for char in text:
        data = char.encode("utf-8")
        if len(chunk) + len(data) > _WORD_BYTES:
            words.append(chunk.decode("utf-8"))
            chunk = b""
        chunk += data
    if chunk or not words:
        words.append(chunk.decode("utf-8"))
    return "\n ".join(
        f"=?utf-8?b?{base64.b64encode(w.encode('utf-8')).decode('ascii')}?=" for w in words
    )


def _set_subject(msg: EmailMessage, subject: str) -> None:
    """Set Subject so that it reads as `subject` exactly (see the module docstring)."""
    if "=?" in subject or not subject.isascii() or len(subject) > _UNFOLDED:
        msg.set_raw("Subject", encoded_words(subject))
    else:
        msg["Subject"] = subject


def _threading(msg: EmailMessage, thread: ThreadContext) -> None:
    """In-Reply-To and References from the valid msg-ids of the mail answered."""
    own = valid_msgids(thread.message_id)
    if not own:
        return
    msg["In-Reply-To"] = own[0]
    references = [r for r in valid_msgids(" ".join(thread.references)) if r != own[0]]
    msg["References"] = " ".join([*references[-(_MAX_REFERENCES - 1) :], own[0]])


def derived_message_id(inbound_message_id: str, domain: str) -> str:
    """A Message-ID that depends only on the inbound one (so a resend repeats it)."""
    digest = hashlib.sha256(inbound_message_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"<reply.{digest[:40]}@{domain}>"


def render_html(markdown_text: str) -> str:
    import nh3

    body = nh3.clean(_markdown().render(markdown_text))
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>\n{body}</body></html>\n'
    )


def _address(addr: str, name: str = "") -> Address:
    local, _, domain = addr.rpartition("@")
    return Address(display_name=name, username=local, domain=domain)


def build_message(
    *,
    from_addr: str,
    from_name: str,
    to_addr: str,
    text: str,
    thread: ThreadContext | None,
    subject: str = "",
    now: datetime | None = None,
    files: Sequence[FilePart] = (),
    reply_to: str = "",
) -> EmailMessage:
    """The mail to send: a reply in `thread`, or a fresh message (cron, heartbeat);
    `reply_to`, when given, where the person's answer should go."""
    domain = from_addr.rpartition("@")[2] or "localhost"
    msg = EmailMessage()
    msg["From"] = _address(from_addr, from_name)
    msg["To"] = _address(to_addr)
    if reply_to:
        msg["Reply-To"] = _address(reply_to)
    msg["Date"] = format_datetime(now or datetime.now(UTC))
    if thread is not None:
        _set_subject(msg, reply_subject(thread.subject))
        msg["Message-ID"] = derived_message_id(thread.source_id, domain)
        _threading(msg, thread)
        msg["Auto-Submitted"] = "auto-replied"
    else:
        fresh = printable(subject, max_chars=_MAX_SUBJECT) or "A message from your assistant"
        _set_subject(msg, fresh)
        msg["Message-ID"] = make_msgid(domain=domain)
        msg["Auto-Submitted"] = "auto-generated"
    # Exchange and friends: do not send vacation notices back to a robot.
    msg["X-Auto-Response-Suppress"] = "All"
    plain = text if text.endswith("\n") else text + "\n"
    msg.set_content(plain, subtype="plain", charset="utf-8")
    msg.add_alternative(render_html(text), subtype="html", charset="utf-8")
    for part in files:
        maintype, _, subtype = part.mime.partition("/")
        if not maintype or not subtype:
            maintype, subtype = "application", "octet-stream"
        msg.add_attachment(part.data, maintype=maintype, subtype=subtype, filename=part.name)
    return msg
