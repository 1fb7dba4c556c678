"""The Matrix channel (matrix-nio, end-to-end encryption on by default).

`create_channel(settings)` builds it from the whole `Settings` (the `[matrix]` section and
the data dir). Modules, one line each:

- `channel`: the `Channel`: builds every part, runs one connection after another, sends.
- `connection`: one logged-in client's sync lifecycle and each batch handed out.
- `carried`: what the channel keeps across the connections of one run.
- `online`: the connection of the moment, for the parts built once per run.
- `backfill`: a limited timeline's gap fetched with `/messages`.
- `events`: a room event read into an `Inbound`, or the reason it is not answered.
- `invites`: room invites joined or declined, once each.
- `media`: media messages (plain or encrypted) downloaded into the media store.
- `downloads`: those files fetched off the sync loop, in per-room order.
- `undecrypted`: events waiting for their room keys.
- `threads`: the channel's pipeline stage: a thread root's text for its first message.
- `send`: a reply as room events (split, related, sent within the rate budget).
- `upload`: a reply's files as media events.
- `attachments`: encrypted files (the spec's v2), encrypted and decrypted chunk by chunk.
- `stream`: an answer shown as it is written, by paced edits.
- `rate`: the account's rate budget (replies, then reactions, then streaming edits).
- `message_marks`: one life for a message's marks: received, answered, settled.
- `typing_notices`: typing leases per message, refreshed while its turn runs.
- `own_reactions`: reactions and read receipts the bot sends; the status reactions.
- `reaction_answers`: a person's reaction read as the answer to an approval prompt.
- `client`: logging in, and matrix-nio's results as squidd's errors.
- `errors`: the table of every nio and aiohttp exception and what squidd does about it.
- `e2ee`: key chores a bare sync does not do, and device trust.
- `policy`: who is answered, where, and whose invites are accepted.
- `render`: markdown to Matrix HTML and back, and splitting long replies.
- `state`: the files in the data dir and when the sync position may advance.
- `ids`: the typed room, event and sync-position ids.
- `probe`: the account checked over HTTP for `squidd doctor`.
- `targets`: a cron target made a room: a room the bot is in, an alias, a person's DM.
- `identity/`: cross-signing nio lacks: the bot's identity, secret storage, trust.
- `verification/`: SAS verification of the people the bot serves.
"""

from __future__ import annotations

from collections.abc import Iterable

from squidd.channels.matrix.channel import MatrixChannel
from squidd.config import Settings
from squidd.core.ports import MediaSink

__all__ = ["MatrixChannel", "create_channel"]


def create_channel(
    settings: Settings,
    *,
    media: MediaSink | None = None,
    name: str = "matrix",
    siblings: Iterable[str] = (),
) -> MatrixChannel:
    """The channel of `settings.matrix`'s account, keeping its files in the data dir of
    `settings` (an agent's own account: `config.matrix_accounts`, named `matrix-<agent>`);
    `siblings`: the daemon's other bot accounts, which it never answers."""
    return MatrixChannel(
        settings.matrix,
        settings.storage.data_dir,
        media=media,
        max_download_bytes=settings.media.max_download_bytes,
        name=name,
        siblings=siblings,
    )
