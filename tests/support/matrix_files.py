"""Files between a person and the bot on the test Synapse: `send_file` uploads a file as
the person (encrypted in an encrypted room) and sends its media event; `downloaded` fetches
a media event's file as the person sees it (decrypted with the event's keys)."""

from __future__ import annotations

import io
from typing import Any

from nio import DownloadError, UploadResponse
from nio.crypto.attachments import decrypt_attachment

from tests.support.matrix import Human, Seen


async def send_file(
    human: Human,
    room: str,
    data: bytes,
    *,
    msgtype: str,
    name: str,
    mime: str,
    encrypted: bool,
    body: str | None = None,
) -> str:
    response, keys = await human.client.upload(
        io.BytesIO(data),
        content_type=mime,
        filename=name,
        encrypt=encrypted,
        filesize=len(data),
    )
    assert isinstance(response, UploadResponse), response
    content: dict[str, Any] = {
        "msgtype": msgtype,
        "body": body or name,
        "filename": name,
        "info": {"mimetype": mime, "size": len(data)},
    }
    if encrypted:
        content["file"] = {**(keys or {}), "url": response.content_uri}
    else:
        content["url"] = response.content_uri
    return await human.send_event(room, "m.room.message", content)


async def downloaded(human: Human, seen: Seen) -> bytes:
    content = seen.content
    file = content.get("file")
    url = file["url"] if file else content["url"]
    response = await human.client.download(mxc=url)
    assert not isinstance(response, DownloadError), response
    body: bytes = response.body
    if file:
        key, digest = file["key"]["k"], file["hashes"]["sha256"]
        return bytes(decrypt_attachment(body, key, digest, file["iv"]))
    return body
