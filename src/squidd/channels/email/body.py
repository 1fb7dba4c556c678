"""A mail's body as the model reads it: the text part, enclosed mails, attachments by name.

`extract_text` picks `text/plain` (else HTML converted to text with html2text), trims quoted
history and signatures (`quoting`), caps the text, and lists attachments by name, type and
size, never their content. A mail it encloses (`message/rfc822` inline or attached, as
clients forward; each part of a `multipart/digest`) follows the sender's own text, marked as
forwarded content with its From, Date and Subject, read the same way, recursively (to
`_MAX_DEPTH`), within the same length cap.

Mail is hostile input: broken MIME, lying or unknown charsets and bad transfer encodings
degrade to "less text" rather than an exception; text is decoded by `charsets.decode` (the
declared charset, UTF-8, cp1252/Latin-1) and cleaned, so what leaves here is valid Unicode
without controls. Where decoding fails the raw text is shown instead of what a failed
decoder makes of it: a "base64" part that is not base64, a multipart whose declared boundary
is not the one its body uses (the boundary of the body's first `--` line is tried, else the
body is shown as it is).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from email.message import EmailMessage, Message
from email.parser import BytesParser

import structlog

from squidd.channels.email.charsets import body_text, decode, header_text, printable, to_bytes
from squidd.channels.email.headers import MIME_POLICY, header_block
from squidd.channels.email.quoting import trim_reply

__all__ = [
    "MAX_PARTS",
    "Attachment",
    "MailText",
    "bounded_parts",
    "content_type",
    "extract_text",
    "human_size",
    "listed_name",
]

log = structlog.get_logger()

_BOUNDARY_LINE_RE = re.compile(rb"^--([!-~]{1,200}?)[ \t]*\r?$", re.M)
_CONTENT_TYPE_RE = re.compile(rb"(?im)^content-type:[^\r\n]*(?:\r?\n[ \t][^\r\n]*)*")
_BOUNDARY_PARAM_RE = re.compile(rb'(?i);?\s*boundary\s*=\s*("[^"]*"|[^;\s]*)')
_MAX_NAME_CHARS = 120
_HTML_CHARS_PER_TEXT_CHAR = 20
_MAX_DEPTH = 5
MAX_PARTS = 1000
"""Parts of one mail that are parsed at most (see `bounded_parts`)."""
_PART_LINE_RE = re.compile(rb"^--", re.M)
_MIME_TYPE_RE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
_UNKNOWN_TYPE = "application/octet-stream"
"""Enclosed mails are read this many levels deep (a forward of a forward of ...)."""
_MIN_ENCLOSED_CHARS = 200
_MAX_FIELD_CHARS = 300
_ENCLOSING_TYPES = frozenset({"message/rfc822", "message/global"})
_EML_TYPES = frozenset({"application/octet-stream", "application/eml", "text/plain"})
_TRUNCATED = "[... truncated: the mail is longer than what is shown here]"


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
    return printable(name, max_chars=_MAX_NAME_CHARS) or "(unnamed)"


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
        return decode(to_bytes(raw)).strip()
    return None


def _decode_text(part: Message) -> str:
    """A text part as str, whatever its charset claims (its raw text where decoding fails)."""
    raw = _not_base64(part)
    if raw is not None:
        return raw
    try:
        payload = part.get_payload(decode=True)
        charset = part.get_content_charset()
    except Exception:  # noqa: BLE001 - a broken part or parameter: read what is there
        payload, charset = part.get_payload(decode=False), None
        payload = to_bytes(payload) if isinstance(payload, str) else None
    return decode(payload if isinstance(payload, bytes) else b"", charset)


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
    stack = [msg]  # the next part on top: children pushed in reverse (linear in the parts)
    while stack:
        part = stack.pop()
        if part.is_multipart() and part.get_content_maintype() == "multipart":
            payload = part.get_payload()
            if isinstance(payload, list):
                stack.extend(reversed([p for p in payload if isinstance(p, Message)]))
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
    import html2text  # only a mail without a text part needs it (docs/performance.md)

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
    again = BytesParser(policy=MIME_POLICY).parsebytes(
        head[: field.start()] + fixed + head[field.end() :] + body
    )
    return again if again.is_multipart() else msg


def content_type(part: Message) -> str:
    """The part's MIME type as a plain `type/subtype`; a declared one that is not (junk bytes,
    controls) is `application/octet-stream`, what an unknown type means (RFC 2046)."""
    try:
        value = part.get_content_type()
    except Exception:  # noqa: BLE001 - a field the parser cannot read is no type
        return _UNKNOWN_TYPE
    return value if _MIME_TYPE_RE.fullmatch(value) else _UNKNOWN_TYPE


def bounded_parts(raw: bytes) -> tuple[bytes, bool]:
    """`raw` cut before its `MAX_PARTS`-th boundary-like line (whether it was cut): parsing
    costs a few milliseconds per part, and a 10 MB mail can hold a hundred thousand."""
    for count, match in enumerate(_PART_LINE_RE.finditer(raw), start=1):
        if count > MAX_PARTS:
            return raw[: match.start()], True
    return raw, False


def extract_text(raw: bytes, *, max_chars: int) -> MailText:
    """The readable body of a whole message, trimmed and capped to `max_chars`; mails it
    encloses (forwarded as `message/rfc822`, a `multipart/digest`) follow, each marked."""
    raw, cut = bounded_parts(raw)
    try:
        msg = _repair_boundary(BytesParser(policy=MIME_POLICY).parsebytes(raw), raw)
        read = _read(msg, max_chars=max_chars, label="")
        if not cut:
            return read
        note = f"[... the mail has more than {MAX_PARTS} parts; the rest is not shown]"
        return MailText(f"{read.text}\n{note}", read.attachments, read.from_html, True)
    except Exception as exc:  # noqa: BLE001 - a parser defect on hostile MIME: raw text instead
        log.warning("email_body_unparsed", error=type(exc).__name__)
    body = raw[len(header_block(raw)) :]
    text = body_text(decode(body[: max_chars * 4]))
    truncated = len(body) > max_chars * 4 or len(text) > max_chars
    return MailText(text=text[:max_chars], attachments=(), from_html=False, truncated=truncated)


def _choose_body(msg: Message, leaves: list[Message]) -> Message | None:
    if isinstance(msg, EmailMessage):
        try:
            body = msg.get_body(preferencelist=("plain", "html"))
        except Exception:  # noqa: BLE001 - malformed MIME: fall back to walking the parts
            body = None
        if body is not None:
            return body
    text_leaves = [p for p in leaves if not _is_attachment(p)]
    plain = [p for p in text_leaves if p.get_content_type() == "text/plain"]
    html = [p for p in text_leaves if p.get_content_type() == "text/html"]
    chosen = plain or html
    return chosen[0] if chosen else None


def _own_text(msg: Message, body: Message | None, max_chars: int) -> tuple[str, bool, bool]:
    """(the text of `body`, whether it came from HTML, whether the HTML was cut)."""
    text = ""
    if body is None and msg.get_content_maintype() == "multipart" and not msg.is_multipart():
        # Parts that could not be told apart: the body as it is beats nothing.
        payload = msg.get_payload(decode=False)
        text = decode(to_bytes(payload)) if isinstance(payload, str) else ""
    if body is None:
        return text, False, False
    text = _decode_text(body)
    if body.get_content_type() != "text/html":
        return text, False, False
    # Converting HTML costs seconds per megabyte; only the start can reach the prompt, so
    # only a generous multiple of the text budget is converted.
    html_budget = max_chars * _HTML_CHARS_PER_TEXT_CHAR
    return _html_to_text(text[:html_budget]), True, len(text) > html_budget


def _read(msg: Message, *, max_chars: int, label: str) -> MailText:
    """One message as text: its own words (trimmed of quoted history at the top level),
    then each mail it encloses, recursively, all within `max_chars`."""
    leaves = _leaves(msg)
    body = _choose_body(msg, leaves)
    attachments: list[Attachment] = []
    enclosed: list[Message] = []
    for part in leaves:
        if part is body:
            continue
        inner = _enclosed(part) if label.count(".") < _MAX_DEPTH else None
        if inner is not None:
            enclosed.append(inner)
        elif _is_attachment(part):
            attachments.append(_listed(part))
    text, from_html, truncated = _own_text(msg, body, max_chars)
    text = body_text(text.replace("\t", "    "))
    if not label:
        text = trim_reply(text)
    if truncated or len(text) > max_chars:
        truncated = True
        text = f"{text[:max_chars].rstrip()}\n{_TRUNCATED}"
    blocks = [text] if text else []
    budget = max_chars - len(text)
    for index, inner in enumerate(enclosed, start=1):
        if budget <= _MIN_ENCLOSED_CHARS:
            blocks.append(
                f"[... {len(enclosed) - index + 1} more enclosed mails not shown: "
                "over the length limit]"
            )
            truncated = True
            break
        block = _forwarded(inner, f"{label}{index}", budget)
        truncated = truncated or block.truncated
        budget -= len(block.text)
        blocks.append(block.text)
    return MailText(
        text="\n\n".join(blocks),
        attachments=tuple(attachments),
        from_html=from_html,
        truncated=truncated,
    )


def _forwarded(inner: Message, label: str, budget: int) -> MailText:
    """An enclosed mail as the model reads it: marked as forwarded, its From, Date and
    Subject, its text and its attachments by name."""
    fields = [
        f"{name}: {value}" for name in ("From", "Date", "Subject") if (value := _field(inner, name))
    ]
    head = [
        f"----- Forwarded message {label} (enclosed in this mail; not written by its sender) -----",
        *fields,
        "",
    ]
    tail = f"----- End of forwarded message {label} -----"
    room = max(budget - sum(len(line) + 1 for line in head) - len(tail), _MIN_ENCLOSED_CHARS)
    read = _read(inner, max_chars=room, label=f"{label}.")
    lines = [*head, read.text or "(no text)"]
    if read.attachments:
        listed = "; ".join(
            f"{a.name} ({a.content_type}, {human_size(a.size)})" for a in read.attachments
        )
        lines.append(f"[Attachments of forwarded message {label}, not opened: {listed}]")
    lines.append(tail)
    return MailText("\n".join(lines), read.attachments, read.from_html, read.truncated)


def _field(msg: Message, name: str) -> str:
    """A header of an enclosed mail as printable text ('' when absent or unreadable)."""
    try:
        values = [str(v) for k, v in msg.raw_items() if k.lower() == name.lower()]
    except Exception:  # noqa: BLE001 - a broken enclosed header is no header
        return ""
    return header_text(values[0], max_chars=_MAX_FIELD_CHARS) if values else ""


def _enclosed(part: Message) -> Message | None:
    """The mail a `message/rfc822` (or `message/global`) part holds, or an attached `.eml`
    file sent under a generic type (as some clients and groupware forward); else None."""
    if part.get_content_type() in _ENCLOSING_TYPES:
        payload = part.get_payload()
        if isinstance(payload, list) and payload and isinstance(payload[0], Message):
            return payload[0]
        return None
    if part.get_content_type() not in _EML_TYPES:
        return None
    try:
        name = part.get_filename() or ""
        data = part.get_payload(decode=True)
    except Exception:  # noqa: BLE001 - a broken part is an attachment like any other
        return None
    if not name.lower().endswith(".eml") or not isinstance(data, bytes):
        return None
    return BytesParser(policy=MIME_POLICY).parsebytes(bounded_parts(data)[0])


def _listed(part: Message) -> Attachment:
    try:
        filename = part.get_filename() or ""
    except Exception:  # noqa: BLE001 - a name we cannot decode is no name
        filename = ""
    return Attachment(
        name=_clean_name(filename),
        content_type=content_type(part),
        size=_payload_size(part),
    )


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"  # pragma: no cover
