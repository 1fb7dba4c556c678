"""Sending over SMTP with aiosmtplib: implicit TLS, STARTTLS or (explicitly) plain, and AUTH.

One connection per mail: replies are rare, and a fresh connection has no stale state to
recover from. Every failure becomes `DeliveryError` (the router retries with backoff and
leaves the inbound mail unacknowledged meanwhile); the message never carries a secret.
"""

from __future__ import annotations

import ssl
from email.message import EmailMessage

import aiosmtplib
import structlog

from squidd.config.email import EmailSettings
from squidd.errors import DeliveryError
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
        except aiosmtplib.SMTPAuthenticationError as exc:
            log.error("email_smtp_login_rejected", host=s.smtp_host, code=exc.code)  # noqa: TRY400 - the code says it all
            raise DeliveryError("the SMTP server rejected the login") from exc
        except aiosmtplib.SMTPResponseException as exc:
            raise DeliveryError(f"the SMTP server refused the mail ({exc.code})") from exc
        except (aiosmtplib.SMTPException, OSError, ssl.SSLError) as exc:
            raise DeliveryError(f"SMTP not reachable: {type(exc).__name__}") from exc
