"""Matrix media messages (`m.image`, `m.file`, `m.audio`, `m.video`, plain or encrypted)
read into an attachment: downloaded in chunks, decrypted on the way, into the media store.

The event's `info.size` over the cap: nothing is downloaded, the assistant gets the name,
type and size with "too large". Otherwise the content is streamed from the homeserver's
authenticated media endpoint straight into the media sink (never whole in memory); in an
encrypted room the event's `file` carries the AES-CTR key and IV and the SHA-256 of the
ciphertext, which is checked before the file is kept (`attachments.decrypt`). A caption is
the `body` when it is not the file name; without one the message text names the file
(`[image: cat.png]`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import structlog
from nio import AsyncClient

from squidd.channels.matrix.attachments import AttachmentError, decrypt
from squidd.core.models import Attachment, AttachmentKind
from squidd.core.ports import MediaSink
from squidd.fs import display_name
from squidd.text import clean_data

log = structlog.get_logger()

KINDS: dict[str, AttachmentKind] = {
    "m.image": "image",
    "m.file": "file",
    "m.audio": "audio",
    "m.video": "video",
}
_MXC = re.compile(r"mxc://([A-Za-z0-9.:\[\]-]{1,255})/([A-Za-z0-9_-]{1,255})")
_CHUNK = 64 * 1024


class MediaError(Exception):
    """The file could not be fetched or failed its integrity check."""


def media_content(event: Any) -> Mapping[str, Any] | None:
    """The content of a media message (plain or decrypted), every string in it made valid
    text (`clean_data`), else None."""
    source = getattr(event, "source", None)
    if not isinstance(source, Mapping) or source.get("type") != "m.room.message":
        return None
    content = source.get("content")
    if not isinstance(content, Mapping) or content.get("msgtype") not in KINDS:
        return None
    file = content.get("file")
    url = file.get("url") if isinstance(file, Mapping) else content.get("url")
    if not isinstance(url, str) or not isinstance(getattr(event, "sender", None), str):
        return None
    cleaned: Mapping[str, Any] = clean_data(dict(content))  # names, captions, types: valid text
    return cleaned


def is_media_message(event: Any) -> bool:
    return media_content(event) is not None


def label(att: Attachment) -> str:
    """The text of a media message without a caption: `[image: cat.png]`, `[voice note]`."""
    return "[voice note]" if att.kind == "audio" else f"[{att.kind}: {att.name}]"


def caption_and_name(content: Mapping[str, Any]) -> tuple[str, str]:
    """(caption or "", file name): `body` is a caption only when a distinct `filename` is set."""
    body = content.get("body") if isinstance(content.get("body"), str) else ""
    filename = content.get("filename") if isinstance(content.get("filename"), str) else ""
    if filename and body and body != filename:
        return str(body), str(filename)
    return "", str(filename or body or "file")


async def fetch(
    client: AsyncClient,
    content: Mapping[str, Any],
    *,
    sink: MediaSink,
    session_id: str,
    max_bytes: int,
) -> Attachment:
    """The attachment for a media message: kept in the sink, or a reference saying why not."""
    kind = KINDS[str(content["msgtype"])]
    _, name = caption_and_name(content)
    info = content.get("info")
    info = info if isinstance(info, Mapping) else {}
    mime = str(info["mimetype"]) if isinstance(info.get("mimetype"), str) else ""
    size = int(info["size"]) if isinstance(info.get("size"), int) else 0
    if size > max_bytes:
        log.info("matrix_media_too_large", size=size, max_bytes=max_bytes)
        return Attachment(kind, display_name(name), mime, size, note="too large")
    file = content.get("file")
    url = str(file["url"] if isinstance(file, Mapping) else content["url"])
    try:
        chunks = _download(client, url)
        if isinstance(file, Mapping):
            chunks = decrypt(chunks, file)
        return await sink.save(
            session_id, kind=kind, name=name, mime=mime, chunks=chunks, max_bytes=max_bytes
        )
    except (MediaError, AttachmentError, aiohttp.ClientError, TimeoutError) as exc:
        log.warning("matrix_media_failed", reason=str(exc) or type(exc).__name__)
        return Attachment(kind, display_name(name), mime, size, note="could not be downloaded")


async def _download(client: AsyncClient, url: str) -> AsyncIterator[bytes]:
    match = _MXC.fullmatch(url)
    if match is None:
        raise MediaError("not an mxc:// URL")
    server, media_id = match.groups()
    session = client.client_session
    if session is None:
        raise MediaError("not connected")
    headers = {"Authorization": f"Bearer {client.access_token}"}
    base = client.homeserver.rstrip("/")
    paths = (
        f"/_matrix/client/v1/media/download/{server}/{media_id}",
        f"/_matrix/media/v3/download/{server}/{media_id}",  # servers without authenticated media
    )
    for path in paths:
        async with session.get(base + path, headers=headers, ssl=client.ssl) as response:
            if response.status in (400, 404) and path is paths[0]:
                continue
            if response.status != 200:
                raise MediaError(f"homeserver answered {response.status}")
            async for chunk in response.content.iter_chunked(_CHUNK):
                yield chunk
            return
