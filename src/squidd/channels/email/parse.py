"""Turning raw RFC 5322 bytes into what the policy checks and what the model reads.

Everything goes through the standard `email` package with `policy.default` (RFC 2047 words,
charsets, MIME). Mail is hostile input: every step tolerates malformed headers, unknown
charsets and broken MIME, and degrades to "less text" rather than an exception.

* `parse_headers` reads only the header block (fetched before the body, so a mail over the
  size cap is judged without downloading it).
* `extract_text` picks `text/plain` (else HTML converted to text with html2text), trims
  quoted history and signatures, and lists attachments by name, type and size only.

Where decoding fails the raw text is shown instead of what a failed decoder makes of it: a
subject whose encoded words do not decode (U+FFFD where the raw field had none), a "base64"
part that is not base64, a multipart whose declared boundary is not the one its body uses
(the boundary of the body's first `--` line is tried, else the body is shown as it is).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import re
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import getaddresses

import html2text
import structlog

log = structlog.get_logger()

_MSGID_RE = re.compile(r"<[^<>\s]{1,900}>")
_FOLD_RE = re.compile(r"\r?\n[ \t]+")
_BOUNDARY_LINE_RE = re.compile(rb"^--([!-~]{1,200}?)[ \t]*\r?$", re.M)
_CONTENT_TYPE_RE = re.compile(rb"(?im)^content-type:[^\r\n]*(?:\r?\n[ \t][^\r\n]*)*")
_BOUNDARY_PARAM_RE = re.compile(rb'(?i);?\s*boundary\s*=\s*("[^"]*"|[^;\s]*)')
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_MAX_NAME_CHARS = 120
_HTML_CHARS_PER_TEXT_CHAR = 20


@dataclass(frozen=True, slots=True)
class Attachment:
    """An attachment as the model is told about it: never its content."""

    name: str
    content_type: str
    size: int


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


def _raw_text(raw: str) -> str:
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
        if raw is not None and "\ufffd" not in (shown := _raw_text(raw)):
            text = shown
        elif text == "\ufffd":
            return ""
    return _CONTROL_RE.sub(" ", text).strip()


def _all_headers(msg: Message, name: str) -> tuple[str, ...]:
    try:
        values = msg.get_all(name) or []
    except Exception:  # noqa: BLE001 - see _header
        return ()
    out = []
    for value in values:
        try:
            out.append(_CONTROL_RE.sub(" ", str(value)).strip())
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
            out.append((lowered, _CONTROL_RE.sub(" ", str(value)).strip()))
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


# --- body ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MailText:
    """What the model is shown of a mail's body."""

    text: str
    attachments: tuple[Attachment, ...]
    from_html: bool
    truncated: bool


def _clean_name(name: str) -> str:
    name = _CONTROL_RE.sub(" ", name).replace("\n", " ").strip()
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
        return _raw_text(raw).strip()
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


_ATTRIBUTION_RE = re.compile(
    r"^(on\b.{0,300}\bwrote:|am\b.{0,300}\bschrieb.{0,80}:|le\b.{0,300}\ba écrit\s*:"
    r"|el\b.{0,300}\bescribió:|.{0,300}\bwrote:)\s*$",
    re.IGNORECASE,
)
_ORIGINAL_RE = re.compile(
    r"^\s*-{2,}\s*(original message|ursprüngliche nachricht|message d'origine)\s*-{2,}\s*$",
    re.IGNORECASE,
)
_OUTLOOK_RULE_RE = re.compile(r"^\s*_{10,}\s*$")
_OUTLOOK_FROM_RE = re.compile(r"^\s*\**(from|von|de):\**\s", re.IGNORECASE)
_MOBILE_SIG_RE = re.compile(r"^\s*(sent from my \w+|get outlook for \w+)", re.IGNORECASE)


def _next_nonblank(lines: list[str], start: int) -> str:
    """The first line from `start` on that is not blank, stripped; '' if none."""
    for index in range(start, len(lines)):
        stripped = lines[index].strip()
        if stripped:
            return stripped
    return ""


def trim_reply(text: str) -> str:
    """Drop quoted history and the signature; keep the text the sender wrote now.

    Forwarded content is kept (the user may want it read). When trimming would leave
    nothing, the text is returned as it was.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if line in ("-- ", "--"):
            break  # RFC 3676 signature delimiter
        if _ORIGINAL_RE.match(line):
            break
        if _OUTLOOK_RULE_RE.match(line) and any(
            _OUTLOOK_FROM_RE.match(following) for following in lines[index + 1 : index + 3]
        ):
            break
        if stripped.startswith(">"):
            continue
        if _ATTRIBUTION_RE.match(stripped):
            # Only the next non-blank line matters; scanning all the rest for every such
            # line made a long mail of them quadratic (the receive loop stalled on it).
            following = _next_nonblank(lines, index + 1)
            if not following or following.startswith(">"):
                continue
        kept.append(line.rstrip())
    while kept and not kept[-1].strip():
        kept.pop()
    if kept and _MOBILE_SIG_RE.match(kept[-1]):
        kept.pop()
    result = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return result or text.strip()


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
        text = _raw_text(payload) if isinstance(payload, str) else ""
    if body is not None:
        text = _decode_text(body)
        if body.get_content_type() == "text/html":
            from_html = True
            # Converting HTML costs seconds per megabyte; only the start can reach the
            # prompt, so only a generous multiple of the text budget is converted.
            html_budget = max_chars * _HTML_CHARS_PER_TEXT_CHAR
            cut_html = len(text) > html_budget
            text = _html_to_text(text[:html_budget])
    text = trim_reply(_CONTROL_RE.sub("", text.replace("\t", "    ")))
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
