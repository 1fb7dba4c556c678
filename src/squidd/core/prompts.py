"""Approval prompts delivered like replies: kept in the outbox, sent with the router's
retries, parked when refused for good, sent once across a crash.

A prompt answers no message of its own: it belongs to the turn that asks (core/approvals.py).
It is kept in the outbox under its own record, `approval:<question id>` of the asking
message's channel, *before* it is sent, then sent by the router's delivery
(`Router.deliver`: the same capped backoff while it fails for a passing reason, one attempt
for a permanent refusal), and recorded as handled once it went out. So:

* a prompt kept in the outbox when the daemon died is sent when the resumed turn meets its
  question again (its id comes from the turn and the call), and a prompt recorded as sent
  is never sent again;
* a prompt the channel refuses for good (an unknown room, a message too large) or whose
  send hits a defect is parked (`loop = "approval"`, with the prompt as its reply, not
  retryable: the question it asked is denied) and recorded as handled with failure; the
  call is denied and the model told why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from squidd.core.models import ChannelName, Inbound, PendingReply, SourceId
from squidd.core.poison import Parked, PoisonGuard, describe, parked_id
from squidd.core.ports import HandledLog, Outbox
from squidd.core.settlement import Refused, Undeliverable

__all__ = ["PromptDelivery", "drop_decided", "question_of", "record_of"]

log = structlog.get_logger()

Deliver = Callable[[Inbound, PendingReply, tuple[str, ...]], Awaitable[None]]


PREFIX = "approval:"


def record_of(question_id: str) -> SourceId:
    """The outbox and handled record of a question's prompt."""
    return SourceId(f"{PREFIX}{question_id}")


def question_of(record: str) -> str | None:
    """The question id of a prompt's record; None for any other record."""
    return record.removeprefix(PREFIX) if record.startswith(PREFIX) else None


async def drop_decided(sources: list[tuple[str, str]], waiting: set[str], outbox: Outbox) -> int:
    """Remove from the outbox the prompts kept for questions no longer waiting (decided or
    timed out while the daemon was down: no turn will come to send them); how many."""
    dropped = 0
    for channel, record in sources:
        question = question_of(record)
        if question is not None and question not in waiting:
            await outbox.remove(ChannelName(channel), SourceId(record))
            log.info("approval_prompt_dropped", question=question, reason="no longer waiting")
            dropped += 1
    return dropped


class PromptDelivery:
    """Sends approval prompts the way replies go (see the module)."""

    def __init__(
        self, *, deliver: Deliver, outbox: Outbox, handled: HandledLog, poison: PoisonGuard
    ) -> None:
        self._deliver = deliver
        self._outbox = outbox
        self._handled = handled
        self._poison = poison

    async def send(
        self, inbound: Inbound, question_id: str, prompt: PendingReply, reactions: tuple[str, ...]
    ) -> str | None:
        """None once the prompt went out (now, or before a restart); else why it never will."""
        channel, record = inbound.channel, record_of(question_id)
        if await self._handled.contains(channel, record):
            if await self._handled.failed(channel, record):
                return "its prompt was refused before"
            return None
        kept = await self._outbox.get(channel, record)
        if kept is None:
            await self._outbox.put(channel, record, prompt)
            kept = prompt
        else:
            log.info("approval_prompt_resumed_from_outbox", question=question_id)
        try:
            await self._deliver(inbound, kept, reactions)
        except Refused as refused:
            await self._park(inbound, record, kept, refused.reason, "Refused")
            return refused.reason
        except Undeliverable:
            await self._handled.add(channel, record, failed=True)
            await self._outbox.remove(channel, record)
            return "its channel is not running"
        except Exception as exc:  # a defect in the send: parked, the call denied
            log.exception("approval_prompt_failed", question=question_id)
            await self._park(inbound, record, kept, describe(exc), type(exc).__name__)
            return describe(exc)
        await self._handled.add(channel, record)
        await self._outbox.remove(channel, record)
        log.info("approval_prompt_delivered", question=question_id)
        return None

    async def _park(
        self, inbound: Inbound, record: SourceId, prompt: PendingReply, reason: str, error: str
    ) -> None:
        item = Parked(
            id=parked_id(inbound.channel, record),
            loop="approval",
            channel=inbound.channel,
            source_id=record,
            session_id=inbound.session_id,
            reason=f"approval prompt not delivered: {reason}",
            error=error,
            attempts=1,
            reply=prompt,
        )
        await self._poison.park(item)
        await self._handled.add(inbound.channel, record, failed=True)
        await self._outbox.remove(inbound.channel, record)
