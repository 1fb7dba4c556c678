"""The Matrix channel (matrix-nio, end-to-end encryption on by default).

`create_channel(settings)` builds it from the whole `Settings` (the `[matrix]` section and
the data dir). Modules: `channel` (the `Channel`: run and send), `connection` (one
logged-in client's sync lifecycle), `events` (a room event read into an `Inbound`),
`invites` (join or decline), `media` (media messages into the media store), `downloads`
(files fetched off the sync loop, per-room order), `send`
(a reply as room events), `typing_notices` (typing leases), `undecrypted` (events
waiting for their keys), `client` (login, error translation), `e2ee` (key chores,
device trust), `policy` (who is answered), `render` (markdown to Matrix HTML, splitting),
`state` (files in the data dir, sync position), `identity/` (cross-signing: the bot's
identity, secret storage, trust by identity).
"""

from __future__ import annotations

from squidd.channels.matrix.channel import MatrixChannel
from squidd.config import Settings
from squidd.core.ports import MediaSink

__all__ = ["MatrixChannel", "create_channel"]


def create_channel(settings: Settings, *, media: MediaSink | None = None) -> MatrixChannel:
    return MatrixChannel(
        settings.matrix,
        settings.storage.data_dir,
        media=media,
        max_download_bytes=settings.media.max_download_bytes,
    )
