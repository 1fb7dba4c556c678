"""The send path: an `Outbound` checked, threaded on the mail it answers, built and sent.

A target that is not a plain address, or a reply that cannot be built into a mail, is
refused for good (`DeliveryRefusedError`): a retry would fail the same way. A reply to an
email inbound carries that mail's threading headers; SMTP's own failures are sorted by
`smtp.classify`.
"""

from __future__ import annotations

import re

import structlog

from squidd.channels.email.compose import ThreadContext, build_message
from squidd.channels.email.inbound import thread_of
from squidd.channels.email.smtp import SmtpSender
from squidd.config.email import EmailSettings
from squidd.core.models import Outbound
from squidd.errors import DeliveryRefusedError

__all__ = ["send_reply"]

log = structlog.get_logger()

_ADDRESS_RE = re.compile(r"^[^@\s<>()\[\],;:\"\\]+@[A-Za-z0-9.-]+\.?[A-Za-z0-9-]*$")


async def send_reply(outbound: Outbound, *, settings: EmailSettings, smtp: SmtpSender) -> None:
    """Send `outbound` from `settings.address` to its target address."""
    target = outbound.target.strip()
    if not _ADDRESS_RE.match(target):
        raise DeliveryRefusedError("not an email address")
    thread: ThreadContext | None = None
    inbound = outbound.in_reply_to
    if inbound is not None and inbound.channel == "email":
        thread = thread_of(inbound)
    try:
        message = build_message(
            from_addr=settings.address,
            from_name=settings.from_name,
            to_addr=target,
            text=outbound.text,
            thread=thread,
            subject=outbound.subject,
        )
    except (ValueError, TypeError) as exc:
        raise DeliveryRefusedError(f"could not build the mail: {type(exc).__name__}") from exc
    await smtp.send(message, recipient=target)
    log.info(
        "email_sent",
        to=target,
        message_id=str(message["Message-ID"]),
        in_reply_to=thread.message_id if thread else None,
    )
