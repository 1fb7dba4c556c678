"""Trying the mailbox's servers without touching any mail (`squidd doctor`, `init
--interactive`).

`probe_imap` logs in the way the channel does (TLS or STARTTLS, then LOGIN), selects the
folder and reports the server's IDLE capability and the folder's UIDVALIDITY; it reads no
message and sets no flag. `probe_smtp` connects and logs in, then says goodbye: no mail is
sent. Failures are the channel's own error types (`PermanentError` for a refused login or
an untrusted certificate, `TransientError` / `DeliveryError` for the network).
"""

from __future__ import annotations

from dataclasses import dataclass

import aiosmtplib

from squidd.channels.email.errors import SMTP_CAUGHT, smtp_error
from squidd.channels.email.imap import ImapFolder
from squidd.channels.email.tls import make_tls_context
from squidd.config.email import EmailSettings
from squidd.errors import PermanentError
from squidd.secrets import secret_value

__all__ = ["ImapFacts", "probe_imap", "probe_smtp"]


@dataclass(frozen=True, slots=True)
class ImapFacts:
    idle: bool
    uidvalidity: int


async def probe_imap(settings: EmailSettings) -> ImapFacts:
    folder = ImapFolder(settings, make_tls_context(settings.ca_file))
    try:
        await folder.connect(settings.folder)
        return ImapFacts(idle=folder.has_capability("IDLE"), uidvalidity=folder.uidvalidity)
    finally:
        await folder.close()


async def probe_smtp(settings: EmailSettings) -> bool:
    """Connect and log in (True) or only connect when no login is configured (False)."""
    login = settings.smtp_login
    tls = make_tls_context(settings.ca_file)
    client = aiosmtplib.SMTP(
        hostname=settings.smtp_host,
        port=settings.smtp_port,
        use_tls=settings.smtp_security == "tls",
        start_tls=settings.smtp_security == "starttls",
        tls_context=tls if settings.smtp_security != "none" else None,
        timeout=settings.timeout_s,
    )
    try:
        await client.connect()
        if login is not None:
            await client.login(login[0], secret_value(login[1]) or "")
        await client.quit()
    except SMTP_CAUGHT as exc:
        error = smtp_error(exc)
        if error is None:
            raise
        if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
            raise PermanentError("the SMTP server rejected the login") from None
        raise error from None
    finally:
        client.close()
    return login is not None
