"""What the model is handed for one mail: the `Inbound`, its prompt text and its meta.

The prompt text is the subject, the body text and a list of the attachments not opened
(the allowed ones are stored and travel as `Inbound.attachments`); a
mail over the size cap is not read at all, and the model is told to say so instead. The
inbound's `meta` is private to this channel: its keys are written here, and `thread_of`
reads back what the reply to that mail threads on. A chat command (`/new`) is read from the
subject, or else the body's first line (`command_line`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from squidd.channels.email.body import MailText, human_size
from squidd.channels.email.compose import ThreadContext
from squidd.channels.email.headers import MailHeaders
from squidd.core.models import (
    AckHook,
    Attachment,
    ChannelName,
    Inbound,
    SessionId,
    SourceId,
    UndeliverableHook,
)

__all__ = ["command_line", "make_inbound", "oversize_notice", "prompt_text", "thread_of"]

_MAX_LISTED = 50
"""Attachments named in the prompt at most; the rest are counted."""


def prompt_text(
    headers: MailHeaders, body: MailText, *, opened: Sequence[tuple[str, str]] = ()
) -> str:
    """The subject, the body text and the attachments by name, type and size. `opened`
    ((name, type) as listed) were stored and reach the model themselves: not listed."""
    parts = [f"Subject: {headers.subject}" if headers.subject else "(no subject)", ""]
    parts.append(body.text or "(no text)")
    skip = list(opened)
    rest = []
    for a in body.attachments:
        if (a.name, a.content_type) in skip:
            skip.remove((a.name, a.content_type))
        else:
            rest.append(a)
    if rest:
        listed = "; ".join(
            f"{a.name} ({a.content_type}, {human_size(a.size)})" for a in rest[:_MAX_LISTED]
        )
        if len(rest) > _MAX_LISTED:
            listed += f"; and {len(rest) - _MAX_LISTED} more"
        parts += ["", f"[Attachments, not opened: {listed}]"]
    return "\n".join(parts)


def oversize_notice(headers: MailHeaders, size: int, max_size_bytes: int) -> str:
    """The prompt for a mail over the size cap: its content was not read."""
    return (
        f"[This email is {human_size(size)}, over the {human_size(max_size_bytes)} "
        "size limit, so its content was not read. "
        f"Subject: {headers.subject or '(none)'}. "
        "Tell the sender briefly that it was too large to read.]"
    )


def make_inbound(
    headers: MailHeaders,
    text: str,
    body: MailText | None,
    *,
    ack: AckHook,
    on_undeliverable: UndeliverableHook,
    attachments: tuple[Attachment, ...] = (),
    channel: str = "email",
) -> Inbound:
    """The Inbound of one accepted mail; `body` is None when it was too large to read;
    `channel`: the channel's name (`email-<agent>` for an agent's own mailbox).

    `meta` holds what this channel reads back: the Message-ID and References a reply
    threads on (`thread_of`), and whether the mail was over the size cap (the log)."""
    meta: dict[str, Any] = {
        "message_id": headers.message_id if headers.has_message_id else "",
        "references": headers.references,
        "oversize": body is None,
    }
    return Inbound(
        channel=ChannelName(channel),
        source_id=SourceId(headers.message_id),
        session_id=SessionId(headers.from_addr),
        sender=headers.from_addr,
        text=text,
        subject=headers.subject,
        meta=meta,
        ack=ack,
        on_undeliverable=on_undeliverable,
        attachments=attachments,
        command=command_line(headers.subject, body.text if body is not None else ""),
        recipients=headers.recipients,
    )


def command_line(subject: str, text: str) -> str:
    """Where a chat command of a mail is: the subject when it starts with a slash (`/new`),
    else the body's first line when it does; "" otherwise (the gateway decides which words
    are commands; the mail itself still reaches the model when it names none)."""
    if subject.strip().startswith("/"):
        return subject.strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if first.startswith("/") else ""


def thread_of(inbound: Inbound) -> ThreadContext:
    """What a reply to `inbound` (an email inbound) threads on."""
    meta = inbound.meta
    return ThreadContext(
        source_id=inbound.source_id,
        message_id=str(meta.get("message_id") or ""),
        subject=inbound.subject,
        references=tuple(str(r) for r in meta.get("references") or ()),
    )
