"""Sending over SMTP with aiosmtplib: implicit TLS, STARTTLS or (explicitly) plain, and AUTH.

One connection per mail: replies are rare, and a fresh connection has no stale state to
recover from. Failures are sorted by what a retry can do (`classify`), and the message
never carries a secret:

* `DeliveryRefusedError` when the server refused *this* mail for good: a 5xx to RCPT (an
  unknown or refused recipient), to DATA (content rejected, 552 too large) or a 552 to
  MAIL FROM (the SIZE announced is too large). The router ends the delivery at once.
* `DeliveryError` (retried with backoff, the inbound mail stays unacknowledged) for
  everything else: 4xx replies, connection and TLS problems, timeouts, and 5xx replies that
  say the account or server setup is wrong (login, greeting, HELO, a sender address the
  server will not take). Those hold for every reply alike and a human can fix them; the
  replies then go out instead of being given up one by one.
"""

from __future__ import annotations

import ssl
from email.message import EmailMessage

import aiosmtplib
import structlog

from squidd.config.email import EmailSettings
from squidd.errors import DeliveryError, DeliveryRefusedError
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
        except (aiosmtplib.SMTPException, OSError, ssl.SSLError) as exc:
            raise classify(exc) from exc


def _permanent(code: int) -> bool:
    return 500 <= code < 600


def classify(exc: BaseException) -> DeliveryError | DeliveryRefusedError:
    """The squidd error for a failed send: refused for good, or worth retrying."""
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
        codes = [r.code for r in exc.recipients]
        if codes and all(_permanent(c) for c in codes):
            return DeliveryRefusedError(f"the SMTP server refused the recipient ({codes[0]})")
        return DeliveryError(
            f"the SMTP server deferred the recipient ({codes[0] if codes else '?'})"
        )
    if isinstance(exc, aiosmtplib.SMTPRecipientRefused | aiosmtplib.SMTPDataError) and _permanent(
        exc.code
    ):
        return DeliveryRefusedError(f"the SMTP server refused the mail ({exc.code})")
    if isinstance(exc, aiosmtplib.SMTPSenderRefused) and exc.code == 552:
        return DeliveryRefusedError("the SMTP server refused the mail as too large (552)")
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        return DeliveryError(f"the SMTP server refused the mail ({exc.code})")
    return DeliveryError(f"SMTP not reachable: {type(exc).__name__}")
