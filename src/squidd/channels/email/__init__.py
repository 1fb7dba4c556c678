"""The email channel: IMAP (aioimaplib) in, SMTP (aiosmtplib) out.

`create_channel(settings)` is what the composition root calls. The pieces:
`imap` (connection, IDLE, UID operations), `parse` (MIME to text), `policy` (who is
answered), `compose` (reply headers and parts), `smtp` (sending), `state` (UIDVALIDITY,
last UID and pending UIDs on disk), `channel` (the receive loop tying them together).
"""

from __future__ import annotations

from squidd.channels.email.channel import EmailChannel
from squidd.config import Settings
from squidd.core.ports import Channel

__all__ = ["EmailChannel", "create_channel"]


def create_channel(settings: Settings) -> Channel:
    """The email channel for `settings.email`, keeping its state under the data dir."""
    return EmailChannel(settings.email, settings.storage.data_dir)
