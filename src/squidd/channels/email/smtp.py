"""Sending over SMTP with aiosmtplib: implicit TLS, STARTTLS or (explicitly) plain, and AUTH.

One connection per mail: replies are rare, and a fresh connection has no stale state to
recover from. Failures are sorted by what a retry can do through the SMTP error table
(`squidd.channels.email.errors`): `DeliveryRefusedError` when the server refused *this*
mail for good (the router ends the delivery at once), `DeliveryError` (retried, the
inbound mail stays unacknowledged) for the rest. No message carries a secret.
"""

from __future__ import annotations

import ssl
from email.message import EmailMessage

import aiosmtplib
import structlog

from squidd.channels.email.errors import SMTP_CAUGHT, smtp_error
from squidd.config.email import EmailSettings
from squidd.secrets import secret_value

log = structlog.get_logger()


class SmtpSender:
    """Hands finished messages to the configured submission server."""

    def __init__(self, settings: EmailSettings, tls_context: ssl.SSLContext) -> None:
        self._settings = settings
        self._tls = tls_context

    async def send(self, message: EmailMessage, *, recipient: str) -> None:
        s = self._settings
        login = s.smtp_login
        username = login[0] if login else None
        password = secret_value(login[1]) if login else None
        try:
            await aiosmtplib.send(
                message,
                sender=s.address,
                recipients=[recipient],
                hostname=s.smtp_host,
                port=s.smtp_port,
                username=username,
                password=password,
                use_tls=s.smtp_security == "tls",
                start_tls=s.smtp_security == "starttls",
                tls_context=self._tls if s.smtp_security != "none" else None,
                timeout=s.timeout_s,
            )
        except SMTP_CAUGHT as exc:
            error = smtp_error(exc)
            if error is None:
                raise  # not the server's doing: a defect
            if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
                log.error("email_smtp_login_rejected", host=s.smtp_host, code=exc.code)  # noqa: TRY400 - the code says it all
            raise error from exc
