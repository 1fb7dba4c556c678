"""The files of a reply as Matrix media events: uploaded, then `m.image` / `m.file`, or
`m.audio` as a voice note for a spoken answer (`voice_fields`).

In a plain room each file is streamed from disk to the homeserver (nio reads it in
chunks); in an encrypted room it is streamed too, each chunk AES-CTR encrypted and hashed
on its way into the request body (`attachments.Encryptor`), and the event carries the key
and the hash in `file`: a file never sits whole in memory. The homeserver's
`m.upload.size` is asked first: a file over it is not uploaded, and the room gets a short
notice that names the file and the limit instead, so a refusal is never silent. Images get
`w`/`h` and, when Pillow can make one, a small thumbnail uploaded the same way (Pillow is
imported then, in the worker thread that makes it, not when the channel is built). A file
that is gone by the time the reply is sent is named in a notice too.

Uploads are not idempotent (a resend after a crash uploads again and leaves the first copy
unreferenced), but the event that shows the file is: its transaction id is derived from
the reply's source id, its position and the file's hash (see `send.transaction_id`).
"""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog
from nio import AsyncClient, ContentRepositoryConfigResponse, ErrorResponse, UploadResponse

from squidd.channels.matrix.attachments import AttachmentKey, Encryptor
from squidd.channels.matrix.errors import NETWORK_ERRORS, describe
from squidd.core.reply_files import FileRef
from squidd.errors import DeliveryError

log = structlog.get_logger()

THUMBNAIL_PX = 320
_THUMBNAIL_SOURCE_MAX = 20 * 1024 * 1024  # bigger images get no thumbnail: not cheap
_MAX_IMAGE_PIXELS = 64_000_000  # beyond this Pillow refuses: a decompression bomb
_CHUNK = 64 * 1024


async def upload_limit(client: AsyncClient) -> int | None:
    """The homeserver's `m.upload.size` in bytes; None when it does not say (or cannot)."""
    try:
        response = await client.content_repository_config()
    except NETWORK_ERRORS as exc:
        raise DeliveryError(f"homeserver unreachable ({describe(exc)})") from exc
    if isinstance(response, ContentRepositoryConfigResponse) and response.upload_size:
        return int(response.upload_size)
    return None


def too_large_text(ref: FileRef, limit: int) -> str:
    return (
        f"(The file {ref.name} ({_human(ref.size)}) was not sent: it is over this "
        f"homeserver's upload limit of {_human(limit)}.)"
    )


def missing_text(ref: FileRef) -> str:
    return f"(The file {ref.name} was not sent: it is no longer available.)"


async def file_content(
    client: AsyncClient, ref: FileRef, *, encrypted: bool, limit: int | None
) -> tuple[dict[str, Any] | None, str]:
    """The event content that shows `ref` after uploading it, or (None, notice text) when
    the file cannot be sent (over `limit`, gone); network trouble is a `DeliveryError`."""
    path = Path(ref.path)
    try:
        size = (await anyio.Path(path).stat()).st_size
    except OSError:
        log.warning("matrix_file_missing", name=ref.name)
        return None, missing_text(ref)
    if limit is not None and size > limit:
        log.warning("matrix_file_too_large", name=ref.name, size=size, limit=limit)
        return None, too_large_text(dataclasses.replace(ref, size=size), limit)
    url, secret = await _upload(client, path, ref.mime, ref.name, size, encrypted=encrypted)
    if url is None:
        log.warning("matrix_file_too_large", name=ref.name, size=size, limit=limit)
        return None, too_large_text(ref, limit or size)
    info: dict[str, Any] = {"size": size, "mimetype": ref.mime}
    msgtype = "m.file"
    if ref.kind == "image":
        msgtype = "m.image"
        info.update(await _thumbnail_info(client, path, size, encrypted=encrypted))
    content: dict[str, Any] = {
        "msgtype": msgtype,
        "body": ref.name,
        "filename": ref.name,
        "info": info,
    }
    if secret is not None:
        content["file"] = {**secret, "url": url}
    else:
        content["url"] = url
    if ref.kind == "voice":
        content.update(voice_fields(ref, content))
    return content, ""


def voice_fields(ref: FileRef, content: dict[str, Any]) -> dict[str, Any]:
    """What makes an uploaded Ogg/Opus file a voice note (Element's form): `m.audio` with
    its duration (ms), MSC1767's audio (duration, waveform), file and text fallbacks, and
    MSC3245's voice marker."""
    info = {**content["info"], "duration": ref.duration_ms}
    location = {"file": content["file"]} if "file" in content else {"url": content["url"]}
    return {
        "msgtype": "m.audio",
        "info": info,
        "org.matrix.msc1767.text": content["body"],
        "org.matrix.msc1767.file": {
            **location,
            "name": ref.name,
            "mimetype": ref.mime,
            "size": info["size"],
        },
        "org.matrix.msc1767.audio": {
            "duration": ref.duration_ms,
            "waveform": list(ref.waveform),
        },
        "org.matrix.msc3245.voice": {},
    }


async def _upload(
    client: AsyncClient,
    source: Path | bytes,
    mime: str,
    name: str,
    size: int,
    *,
    encrypted: bool,
) -> tuple[str | None, dict[str, Any] | None]:
    """(mxc url, the `file` keys when encrypted); (None, None) when the server says too large."""
    if isinstance(source, bytes):
        return await _upload_from(client, source, mime, name, size, encrypted=encrypted)
    # The file is opened and closed here, in the task that sends the reply, never in the body
    # reader: aiohttp reads the body in a task of its own and cancels it when the response is
    # in, and a reader cancelled while its worker thread opened the file would drop a handle
    # nobody closes (a ResourceWarning whenever the collector comes by).
    try:
        opened = await anyio.open_file(source, "rb")
    except OSError as exc:  # gone or unreadable since it was checked: tried again later
        raise DeliveryError(f"upload: the file {name} cannot be read ({describe(exc)})") from exc
    async with opened as handle:
        return await _upload_from(client, handle, mime, name, size, encrypted=encrypted)


async def _upload_from(
    client: AsyncClient,
    source: anyio.AsyncFile[bytes] | bytes,
    mime: str,
    name: str,
    size: int,
    *,
    encrypted: bool,
) -> tuple[str | None, dict[str, Any] | None]:
    key = AttachmentKey.fresh() if encrypted else None
    passes: list[_Pass] = []
    bodies: list[AsyncGenerator[bytes, None]] = []

    # Called again by nio after a 429: each call starts from the beginning of the source.
    def provider(*_: int) -> io.BytesIO | AsyncIterator[bytes]:
        if key is None and isinstance(source, bytes):
            return io.BytesIO(source)
        passes.append(_Pass(Encryptor(key) if key is not None else None))
        bodies.append(_chunks(source, size, passes[-1]))
        return bodies[-1]

    try:
        response, _ = await client.upload(
            provider, content_type=mime, filename=name, encrypt=False, filesize=size
        )
    except NETWORK_ERRORS as exc:
        if passes and passes[-1].shrank:
            raise DeliveryError(f"upload: the file {name} shrank while it was read") from exc
        raise DeliveryError(f"upload: homeserver unreachable ({describe(exc)})") from exc
    finally:
        for body in bodies:
            await body.aclose()
    if isinstance(response, UploadResponse):
        if not passes:
            return str(response.content_uri), None
        if passes[-1].length != size:  # the body was not read to its end
            raise DeliveryError(f"upload: the file {name} was not sent whole")
        encryptor = passes[-1].encryptor
        return str(response.content_uri), encryptor.file_info() if encryptor else None
    if isinstance(response, ErrorResponse) and response.status_code == "M_TOO_LARGE":
        return None, None
    raise DeliveryError(f"upload refused by the homeserver: {describe_response(response)}")


@dataclasses.dataclass(slots=True)
class _Pass:
    encryptor: Encryptor | None
    """None: the file goes as it is (an unencrypted room)."""
    shrank: bool = False
    length: int = 0
    """Bytes of the source read so far."""

    def update(self, chunk: bytes) -> bytes:
        self.length += len(chunk)
        return chunk if self.encryptor is None else self.encryptor.update(chunk)


async def _chunks(
    source: anyio.AsyncFile[bytes] | bytes, size: int, run: _Pass
) -> AsyncGenerator[bytes, None]:
    """The first `size` bytes of `source` from its start, chunk by chunk (encrypted when
    `run` encrypts) as the body is sent. An open file stays open: its opener closes it."""
    if isinstance(source, bytes):
        for start in range(0, len(source), _CHUNK):
            yield run.update(source[start : start + _CHUNK])
        return
    await source.seek(0)
    left = size
    while left > 0:
        chunk = await source.read(min(_CHUNK, left))
        if not chunk:
            run.shrank = True
            raise _Shrank(_name_of(source))
        left -= len(chunk)
        yield run.update(chunk)


def _name_of(handle: anyio.AsyncFile[bytes]) -> str:
    return Path(str(handle.wrapped.name)).name


class _Shrank(ConnectionError):
    """The file ended before its size: the body cannot be completed (aiohttp reports
    a failed write, nio hands it on; `_upload` names the cause)."""


def describe_response(response: Any) -> str:
    code = getattr(response, "status_code", None) or type(response).__name__
    return f"{code} {getattr(response, 'message', '') or ''}".strip()


async def _thumbnail_info(
    client: AsyncClient, path: Path, size: int, *, encrypted: bool
) -> dict[str, Any]:
    """`w`, `h` and a thumbnail for an image, as much as is cheap; {} when Pillow cannot."""
    if size > _THUMBNAIL_SOURCE_MAX:
        return {}
    try:
        width, height, thumb = await anyio.to_thread.run_sync(_make_thumbnail, path)
    except _NoThumbnailError as exc:
        log.info("matrix_thumbnail_skipped", error=exc.kind)
        return {}
    info: dict[str, Any] = {"w": width, "h": height}
    if thumb is None:
        return info
    data, tw, th = thumb
    url, secret = await _upload(
        client, data, "image/png", "thumbnail.png", len(data), encrypted=encrypted
    )
    if url is None:
        return info
    info["thumbnail_info"] = {"w": tw, "h": th, "mimetype": "image/png", "size": len(data)}
    if secret is not None:
        info["thumbnail_file"] = {**secret, "url": url}
    else:
        info["thumbnail_url"] = url
    return info


class _NoThumbnailError(Exception):
    """Pillow cannot read the image; `kind` names its error."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def _make_thumbnail(path: Path) -> tuple[int, int, tuple[bytes, int, int] | None]:
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = _MAX_IMAGE_PIXELS
    try:
        with Image.open(os.fspath(path)) as image:
            width, height = image.size
            if max(width, height) <= THUMBNAIL_PX:
                return width, height, None
            image.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
            out = io.BytesIO()
            mode = "RGBA" if image.mode in ("RGBA", "LA", "P") else "RGB"
            image.convert(mode).save(out, "PNG")
            return width, height, (out.getvalue(), image.size[0], image.size[1])
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError, ValueError) as exc:
        raise _NoThumbnailError(type(exc).__name__) from None


def _human(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    if size >= 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size} bytes"
