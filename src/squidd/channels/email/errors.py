"""The email adapter's error tables: every exception aioimaplib and aiosmtplib define, and
the socket and TLS errors they let through, mapped to the `squidd.errors` type that says
what to do. A class missing here fails `tests/channels/email/test_errors.py`.

IMAP (the receive loop): a server that cannot be reached, drops the connection or stops
answering is a `TransientError` (the loop reconnects with backoff); a certificate that is
not trusted is a `PermanentError` (a human must act). The raw `OSError`s are those of the
socket itself (refused, unreachable, reset, DNS): aioimaplib does not wrap them, and the
calls translated here only talk to the server.

SMTP (a reply): `DeliveryRefusedError` when the server refused *this* mail for good (a 5xx
to RCPT or DATA, a 552 to MAIL FROM); `DeliveryError` (retried) for everything else, 4xx
replies, the network, and set-up problems (login, greeting, no AUTH or STARTTLS) that hold
for every reply alike and that a human can fix, after which the replies go out.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from typing import Any

import aioimaplib
import aiosmtplib

from squidd.errors import (
    DeliveryError,
    DeliveryRefusedError,
    PermanentError,
    SquiddError,
    TransientError,
)

__all__ = ["IMAP_CAUGHT", "IMAP_TABLE", "SMTP_CAUGHT", "SMTP_TABLE", "imap_error", "smtp_error"]


def _lookup(table: Mapping[type[BaseException], Any], exc: BaseException) -> Any:
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    return None


# --- IMAP ------------------------------------------------------------------------------------

ImapTranslate = Callable[[Any, str], SquiddError]
"""(the exception, what was being done) -> the squidd error."""


def _imap_untrusted(exc: ssl.SSLCertVerificationError, what: str) -> SquiddError:
    return PermanentError(f"IMAP server certificate not trusted: {exc.verify_message}")


def _imap_lost(exc: BaseException, what: str) -> SquiddError:
    return TransientError(f"IMAP {what} failed: {type(exc).__name__}")


IMAP_TABLE: Mapping[type[BaseException], ImapTranslate] = {
    aioimaplib.AioImapException: _imap_lost,
    aioimaplib.Error: _imap_lost,
    aioimaplib.Abort: _imap_lost,
    aioimaplib.CommandTimeout: _imap_lost,
    aioimaplib.IncompleteRead: _imap_lost,
    ssl.SSLCertVerificationError: _imap_untrusted,
    ssl.SSLError: _imap_lost,
    TimeoutError: _imap_lost,
    OSError: _imap_lost,
}

IMAP_CAUGHT: tuple[type[BaseException], ...] = tuple(IMAP_TABLE)


def imap_error(exc: BaseException, what: str) -> SquiddError | None:
    """The squidd error for a failed IMAP call; None when `exc` is not in the table."""
    translator: ImapTranslate | None = _lookup(IMAP_TABLE, exc)
    return None if translator is None else translator(exc, what)


# --- SMTP ------------------------------------------------------------------------------------

SmtpError = DeliveryError | DeliveryRefusedError
SmtpTranslate = Callable[[Any], SmtpError]


def _permanent(code: int) -> bool:
    return 500 <= code < 600


def _recipients(exc: aiosmtplib.SMTPRecipientsRefused) -> SmtpError:
    codes = [r.code for r in exc.recipients]
    if codes and all(_permanent(c) for c in codes):
        return DeliveryRefusedError(f"the SMTP server refused the recipient ({codes[0]})")
    return DeliveryError(f"the SMTP server deferred the recipient ({codes[0] if codes else '?'})")


def _this_mail(exc: aiosmtplib.SMTPResponseException) -> SmtpError:
    """A reply to RCPT or DATA: a 5xx is about this mail and holds for good."""
    if _permanent(exc.code):
        return DeliveryRefusedError(f"the SMTP server refused the mail ({exc.code})")
    return DeliveryError(f"the SMTP server refused the mail ({exc.code})")


def _sender(exc: aiosmtplib.SMTPSenderRefused) -> SmtpError:
    if exc.code == 552:  # the SIZE announced with MAIL FROM: this mail is too large
        return DeliveryRefusedError("the SMTP server refused the mail as too large (552)")
    return DeliveryError(f"the SMTP server refused the mail ({exc.code})")


def _setup(exc: aiosmtplib.SMTPResponseException) -> SmtpError:
    """Greeting, HELO, login: the same for every reply; a human fixes it, then all go out."""
    return DeliveryError(f"the SMTP server refused the mail ({exc.code})")


def _login(exc: aiosmtplib.SMTPAuthenticationError) -> SmtpError:
    return DeliveryError("the SMTP server rejected the login")


def _unreachable(exc: BaseException) -> SmtpError:
    return DeliveryError(f"SMTP not reachable: {type(exc).__name__}")


SMTP_TABLE: Mapping[type[BaseException], SmtpTranslate] = {
    aiosmtplib.SMTPRecipientsRefused: _recipients,
    aiosmtplib.SMTPRecipientRefused: _this_mail,
    aiosmtplib.SMTPDataError: _this_mail,
    aiosmtplib.SMTPSenderRefused: _sender,
    aiosmtplib.SMTPAuthenticationError: _login,
    aiosmtplib.SMTPResponseException: _setup,
    aiosmtplib.SMTPHeloError: _setup,
    aiosmtplib.SMTPConnectResponseError: _setup,
    # No AUTH, no STARTTLS, no SMTPUTF8 on this server: set-up, for every reply alike.
    aiosmtplib.SMTPException: _unreachable,
    aiosmtplib.SMTPNotSupported: _unreachable,
    aiosmtplib.SMTPConnectError: _unreachable,
    aiosmtplib.SMTPConnectTimeoutError: _unreachable,
    aiosmtplib.SMTPTimeoutError: _unreachable,
    aiosmtplib.SMTPReadTimeoutError: _unreachable,
    aiosmtplib.SMTPServerDisconnected: _unreachable,
    # What the socket and TLS raise unwrapped (STARTTLS's handshake, a reset mid-reply).
    ssl.SSLError: _unreachable,
    ConnectionError: _unreachable,
    TimeoutError: _unreachable,
}

SMTP_CAUGHT: tuple[type[BaseException], ...] = tuple(SMTP_TABLE)


def smtp_error(exc: BaseException) -> SmtpError | None:
    """The squidd error for a failed send; None when `exc` is not in the table."""
    translator: SmtpTranslate | None = _lookup(SMTP_TABLE, exc)
    return None if translator is None else translator(exc)
