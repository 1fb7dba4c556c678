"""Email attachments the owner opted into, kept in the media store for the model to read.

`email.allowed_attachment_types` names MIME types (`application/pdf`, `image/*`); the first
`max_attachments` attachments of those types, each at most `max_attachment_bytes`, are
stored (content-addressed, the sender's file name never a path) and go to the model as
attachments. All others stay in the listing by name, type and size, unopened.
"""

from __future__ import annotations

import fnmatch
from collections.abc import AsyncIterator, Sequence
from email.message import Message
from email.parser import BytesParser

from squidd.channels.email.body import bounded_parts
from squidd.channels.email.body import content_type as mime_type
from squidd.channels.email.charsets import printable
from squidd.channels.email.headers import MIME_POLICY
from squidd.config.email import EmailSettings
from squidd.core.models import Attachment, AttachmentKind
from squidd.core.ports import MediaSink

_MAX_NAME_CHARS = 200


def allowed(content_type: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(content_type.lower(), p) for p in patterns)


def _kind(content_type: str) -> AttachmentKind:
    major = content_type.split("/", 1)[0]
    return {"image": "image", "audio": "audio", "video": "video"}.get(major, "file")  # type: ignore[return-value]


def _candidates(raw: bytes, settings: EmailSettings) -> list[tuple[str, str, bytes]]:
    """(file name, type, decoded bytes) of the allowed attachments, within the caps."""
    msg = BytesParser(policy=MIME_POLICY).parsebytes(bounded_parts(raw)[0])
    found: list[tuple[str, str, bytes]] = []
    for part in msg.walk():
        if part.is_multipart() or len(found) >= settings.max_attachments:
            continue
        try:
            name = part.get_filename() or ""
        except Exception:  # noqa: BLE001 - a name we cannot decode is no name
            name = ""
        if part.get_content_disposition() != "attachment" and not name:
            continue
        content_type = mime_type(part)
        if not allowed(content_type, settings.allowed_attachment_types):
            continue
        data = _payload(part)
        if data is None or len(data) > settings.max_attachment_bytes:
            continue
        found.append((printable(name, max_chars=_MAX_NAME_CHARS), content_type, data))
    return found


def _payload(part: Message) -> bytes | None:
    try:
        data = part.get_payload(decode=True)
    except Exception:  # noqa: BLE001 - undecodable payload: not opened
        return None
    return data if isinstance(data, bytes) else None


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def keep_attachments(
    raw: bytes, settings: EmailSettings, sink: MediaSink, session_id: str
) -> tuple[tuple[Attachment, ...], list[tuple[str, str, bytes]]]:
    """Store the allowed attachments; (the references, what was stored as (name, type, data))."""
    if not settings.allowed_attachment_types:
        return (), []
    kept: list[Attachment] = []
    found = _candidates(raw, settings)
    for name, content_type, data in found:
        kept.append(
            await sink.save(
                session_id,
                kind=_kind(content_type),
                name=name or "attachment",
                mime=content_type,
                chunks=_once(data),
                max_bytes=settings.max_attachment_bytes,
            )
        )
    return tuple(kept), found
