"""The email channel: IMAP (aioimaplib) in, SMTP (aiosmtplib) out.

`create_channel(settings)` is what the composition root calls. The pieces: `channel` (the
reconnect loop and `send`), `receive` (scan, decide, defer, hand on), `inbound` (the Inbound
and the prompt text), `ack` (confirmed acknowledgement and the undeliverable hook), `send`
(an Outbound to a sent mail), `imap` (connection, IDLE, UID operations), `headers` and
`body` (MIME to text), `charsets` (bytes and encoded words to valid text), `quoting`
(trimming quoted history), `policy` (who is answered), `compose` (reply headers and parts),
`smtp` (sending), `tls` (the TLS context), `state` (UIDVALIDITY, last UID, pending and
deferred UIDs on disk).
"""

from __future__ import annotations

from squidd.channels.email.channel import EmailChannel
from squidd.config import Settings
from squidd.core.ports import Channel, MediaSink

__all__ = ["EmailChannel", "create_channel"]


def create_channel(
    settings: Settings, *, media: MediaSink | None = None, name: str = "email"
) -> Channel:
    """The email channel for `settings.email`, keeping its state under the data dir of
    `settings` (an agent's own mailbox: `Settings.mail_accounts`, named `email-<agent>`)."""
    return EmailChannel(settings.email, settings.storage.data_dir, media=media, name=name)
