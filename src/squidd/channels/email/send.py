"""The send path: an `Outbound` checked, threaded on the mail it answers, built and sent.

The reply's files are attached up to `email.max_reply_attachment_bytes` together; a file
past that cap, or gone by now, is named in a line added to the text instead.

A target that is not a plain address, or a reply that cannot be built into a mail, is
refused for good (`DeliveryRefusedError`): a retry would fail the same way. A reply to an
email inbound carries that mail's threading headers; SMTP's own failures are sorted by
the SMTP error table (`errors.py`). A mail sent to a +tag of the account's address
(`bot+work@example.org`, which routes it to an agent) is answered with that address as
its Reply-To, so the person's next reply in the thread reaches the same agent; From stays
the account's own address, the one its SMTP login may send as.
"""

from __future__ import annotations

import re

import anyio
import structlog

from squidd.channels.email.compose import FilePart, ThreadContext, build_message
from squidd.channels.email.inbound import thread_of
from squidd.channels.email.smtp import SmtpSender
from squidd.config.email import EmailSettings
from squidd.core.models import Outbound
from squidd.core.reply_files import FileRef
from squidd.errors import DeliveryRefusedError

__all__ = ["send_reply", "tagged_address"]

log = structlog.get_logger()

_ADDRESS_RE = re.compile(r"^[^@\s<>()\[\],;:\"\\]+@[A-Za-z0-9.-]+\.?[A-Za-z0-9-]*$")


async def send_reply(outbound: Outbound, *, settings: EmailSettings, smtp: SmtpSender) -> None:
    """Send `outbound` from `settings.address` to its target address."""
    target = outbound.target.strip()
    if not _ADDRESS_RE.match(target):
        raise DeliveryRefusedError("not an email address")
    thread: ThreadContext | None = None
    reply_to = ""
    inbound = outbound.in_reply_to
    if inbound is not None and inbound.channel == outbound.channel:
        thread = thread_of(inbound)
        reply_to = tagged_address(inbound.recipients, settings.address)
    files, notes = await _file_parts(outbound.files, settings.max_reply_attachment_bytes)
    text = "\n\n".join([outbound.text.rstrip(), *notes]) if notes else outbound.text
    try:
        message = build_message(
            from_addr=settings.address,
            from_name=settings.from_name,
            to_addr=target,
            text=text,
            thread=thread,
            subject=outbound.subject,
            files=files,
            reply_to=reply_to,
        )
    except (ValueError, TypeError) as exc:
        raise DeliveryRefusedError(f"could not build the mail: {type(exc).__name__}") from exc
    await smtp.send(message, recipient=target)
    log.info(
        "email_sent",
        to=target,
        message_id=str(message["Message-ID"]),
        in_reply_to=thread.message_id if thread else None,
        files=len(files),
    )


def tagged_address(recipients: tuple[str, ...], own: str) -> str:
    """The first of `recipients` that is `own` with a +tag (`bot+work@example.org` for
    `bot@example.org`), compared without case; "" when none is."""
    local, _, domain = own.lower().partition("@")
    for address in recipients:
        mine, _, where = address.lower().partition("@")
        base, plus, tag = mine.partition("+")
        if plus and tag and base == local and where == domain:
            return address
    return ""


async def _file_parts(refs: tuple[FileRef, ...], cap: int) -> tuple[list[FilePart], list[str]]:
    """The files that fit under `cap` together, and a line for each one that does not."""
    parts: list[FilePart] = []
    notes: list[str] = []
    total = 0
    for ref in refs:
        path = anyio.Path(ref.path)
        try:
            size = (await path.stat()).st_size
            if total + size > cap:
                notes.append(
                    f"(The file {ref.name} ({size} bytes) is not attached: it would take this "
                    f"mail over its attachment limit of {cap} bytes.)"
                )
                log.warning("email_file_too_large", name=ref.name, size=size, cap=cap)
                continue
            data = await path.read_bytes()
        except OSError:
            notes.append(f"(The file {ref.name} is not attached: it is no longer available.)")
            log.warning("email_file_missing", name=ref.name)
            continue
        total += len(data)
        parts.append(FilePart(ref.name, ref.mime, data))
    return parts, notes
