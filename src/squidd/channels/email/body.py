"""A mail's body as the model reads it: the text part, and attachments by name only.

`extract_text` picks `text/plain` (else HTML converted to text with html2text), trims quoted
history and signatures (`quoting`), caps the text, and lists attachments by name, type and
size, never their content. Mail is hostile input: broken MIME, unknown charsets and bad
transfer encodings degrade to "less text" rather than an exception, and where decoding
fails the raw text is shown instead of what a failed decoder makes of it: a "base64" part
that is not base64, a multipart whose declared boundary is not the one its body uses (the
boundary of the body's first `--` line is tried, else the body is shown as it is).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser

import html2text

from squidd.channels.email.headers import CONTROL_RE, header_block, raw_text
from squidd.channels.email.quoting import trim_reply

__all__ = ["Attachment", "MailText", "extract_text", "human_size", "listed_name"]

_BOUNDARY_LINE_RE = re.compile(rb"^--([!-~]{1,200}?)[ \t]*\r?$", re.M)
_CONTENT_TYPE_RE = re.compile(rb"(?im)^content-type:[^\r\n]*(?:\r?\n[ \t][^\r\n]*)*")
_BOUNDARY_PARAM_RE = re.compile(rb'(?i);?\s*boundary\s*=\s*("[^"]*"|[^;\s]*)')
_MAX_NAME_CHARS = 120
_HTML_CHARS_PER_TEXT_CHAR = 20


@dataclass(frozen=True, slots=True)
class Attachment:
    """An attachment as the model is told about it: never its content."""

    name: str
    content_type: str
    size: int


@dataclass(frozen=True, slots=True)
class MailText:
    """What the model is shown of a mail's body."""

    text: str
    attachments: tuple[Attachment, ...]
    from_html: bool
    truncated: bool


def listed_name(name: str) -> str:
    """The name an attachment is listed under (what `extract_text` shows)."""
    return _clean_name(name)


def _clean_name(name: str) -> str:
    name = CONTROL_RE.sub(" ", name).replace("\n", " ").strip()
    return name[:_MAX_NAME_CHARS] or "(unnamed)"


def _not_base64(part: Message) -> str | None:
    """The part's raw text when it claims base64 but is not; else None."""
    if str(part.get("Content-Transfer-Encoding", "")).strip().lower() != "base64":
        return None
    raw = part.get_payload(decode=False)
    if not isinstance(raw, str):
        return None
    try:
        base64.b64decode(re.sub(r"\s+", "", raw), validate=True)
    except (binascii.Error, ValueError):
        return raw_text(raw).strip()
    return None


def _decode_text(part: Message) -> str:
    """A text part as str, whatever its charset claims (its raw text where decoding fails)."""
    raw = _not_base64(part)
    if raw is not None:
        return raw
    if isinstance(part, EmailMessage):
        try:
            content = part.get_content()
        except Exception:  # noqa: BLE001 - unknown charsets and broken encodings fall through
            content = None
        if isinstance(content, str):
            return content
    payload = part.get_payload(decode=True)
    data = payload if isinstance(payload, bytes) else b""
    charset = part.get_content_charset() or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        charset = "utf-8"
    return data.decode(charset, errors="replace")


def _payload_size(part: Message) -> int:
    if part.get_content_maintype() == "message":
        try:
            return len(part.as_bytes())
        except Exception:  # noqa: BLE001 - size of a broken attached mail is unknown
            return 0
    payload = part.get_payload(decode=True)
    return len(payload) if isinstance(payload, bytes) else 0


def _leaves(msg: Message) -> list[Message]:
    """Leaf parts in order; an attached mail (message/*) counts as one leaf."""
    out: list[Message] = []
    stack = [msg]
    while stack:
        part = stack.pop(0)
        if part.is_multipart() and part.get_content_maintype() == "multipart":
            payload = part.get_payload()
            if isinstance(payload, list):
                stack = [p for p in payload if isinstance(p, Message)] + stack
            continue
        out.append(part)
    return out


def _is_attachment(part: Message) -> bool:
    try:
        disposition = (part.get_content_disposition() or "").lower()
        filename = part.get_filename()
    except Exception:  # noqa: BLE001 - a broken parameter makes it "some attachment"
        return True
    if disposition == "attachment" or filename:
        return True
    return part.get_content_maintype() not in ("text", "multipart")


def _html_to_text(html: str) -> str:
    converter = html2text.HTML2Text()
    converter.body_width = 0
    converter.ignore_images = True
    converter.ignore_emphasis = False
    converter.unicode_snob = True
    return str(converter.handle(html))


def _repair_boundary(msg: Message, raw: bytes) -> Message:
    """A multipart whose declared boundary occurs nowhere in its body, parsed again with the
    boundary of the body's first `--` line; the message as it was when that does not help."""
    if msg.get_content_maintype() != "multipart" or msg.is_multipart():
        return msg
    head = header_block(raw)
    body = raw[len(head) :]
    line = _BOUNDARY_LINE_RE.search(body)
    field = _CONTENT_TYPE_RE.search(head)
    if line is None or field is None:
        return msg
    boundary = line.group(1).removesuffix(b"--")
    fixed = _BOUNDARY_PARAM_RE.sub(b"", field.group(0)) + b'; boundary="' + boundary + b'"'
    again = BytesParser(policy=policy.default).parsebytes(
        head[: field.start()] + fixed + head[field.end() :] + body
    )
    return again if again.is_multipart() else msg


def extract_text(raw: bytes, *, max_chars: int) -> MailText:
    """The readable body of a whole message, trimmed and capped to `max_chars`."""
    msg = _repair_boundary(BytesParser(policy=policy.default).parsebytes(raw), raw)
    body: Message | None = None
    if isinstance(msg, EmailMessage):
        try:
            body = msg.get_body(preferencelist=("plain", "html"))
        except Exception:  # noqa: BLE001 - malformed MIME: fall back to walking the parts
            body = None
    leaves = _leaves(msg)
    if body is None:
        text_leaves = [p for p in leaves if not _is_attachment(p)]
        plain = [p for p in text_leaves if p.get_content_type() == "text/plain"]
        html = [p for p in text_leaves if p.get_content_type() == "text/html"]
        chosen = plain or html
        body = chosen[0] if chosen else None
    attachments: list[Attachment] = []
    for part in leaves:
        if part is body:
            continue
        if _is_attachment(part):
            try:
                filename = part.get_filename() or ""
            except Exception:  # noqa: BLE001 - a name we cannot decode is no name
                filename = ""
            attachments.append(
                Attachment(
                    name=_clean_name(filename),
                    content_type=part.get_content_type(),
                    size=_payload_size(part),
                )
            )
    from_html = False
    cut_html = False
    text = ""
    if body is None and msg.get_content_maintype() == "multipart" and not msg.is_multipart():
        # Parts that could not be told apart: the body as it is beats nothing.
        payload = msg.get_payload(decode=False)
        text = raw_text(payload) if isinstance(payload, str) else ""
    if body is not None:
        text = _decode_text(body)
        if body.get_content_type() == "text/html":
            from_html = True
            # Converting HTML costs seconds per megabyte; only the start can reach the
            # prompt, so only a generous multiple of the text budget is converted.
            html_budget = max_chars * _HTML_CHARS_PER_TEXT_CHAR
            cut_html = len(text) > html_budget
            text = _html_to_text(text[:html_budget])
    text = trim_reply(CONTROL_RE.sub("", text.replace("\t", "    ")))
    truncated = cut_html or len(text) > max_chars
    if truncated:
        shown = text[:max_chars].rstrip()
        text = f"{shown}\n[... truncated: the mail is longer than what is shown here]"
    return MailText(
        text=text, attachments=tuple(attachments), from_html=from_html, truncated=truncated
    )


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"  # pragma: no cover
