"""Bursts: several quick messages of one conversation answered as one turn (a stage of the
pipeline, gateway/pipeline.py; the last one).

A person often sends a thought in pieces ("hi" / "can you" / "check the logs?"). On a channel
that declares a quiet window (`core.ports.HasQuietWindow`: Matrix's `matrix.debounce_ms`; 0
turns bursts off; email never merges), `Bursts` holds a conversation's messages until none
came for that long, and while the conversation's turn runs; then it hands them on as one
`Inbound`: the last message's ids and routing (the reply answers it), the texts in order,
all attachments. Its `ack` acknowledges every message of the burst, in order, and only once
the router has delivered the answer: a crash before that leaves them all unacknowledged,
for their source to deliver again. A chat command (a known command word,
core/command_words.py) is never merged: what waits is handed on first, then the
command, so the order holds; `/usr is full` is no command and is merged like any text. A
message that is not a person's (cron, heartbeat) passes straight through, and so does one
whose answer had already begun before a restart (`begun`: its turn journal, its reply in
the outbox, or the channel's streamed message of it): merged with newer messages, it would
be answered anew instead of its answer being finished. So does one answered already (the
handled record holds it): a restart between its answer and its acknowledgement brings it
again, and merged with a newer message it would be answered a second time; alone, the
router only acknowledges it. An answer to an approval question
and `/stop` never reach this stage: earlier stages take them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import structlog

from squidd.core.command_words import parse
from squidd.core.journal import turn_key
from squidd.core.models import Inbound, InboundKind
from squidd.core.ports import (
    Channel,
    HandledLog,
    HandOn,
    Later,
    Outbox,
    ShowsAnswers,
    TurnJournal,
)

__all__ = ["Begun", "Bursts", "began_before", "merge", "never_begun"]

log = structlog.get_logger()


def merge(messages: Sequence[Inbound]) -> Inbound:
    """One inbound for a burst: the last message's ids and routing, every text in order."""
    last = messages[-1]
    if len(messages) == 1:
        return last
    acks = [m.ack for m in messages]
    undeliverable = [(m.ack, m.on_undeliverable) for m in messages]

    async def ack_all() -> None:
        for ack in acks:
            await ack()

    async def give_up_all(reason: str) -> None:
        for ack, give_up in undeliverable:
            await (ack() if give_up is None else give_up(reason))

    text = "\n\n".join(m.text for m in messages if m.text)
    attachments = tuple(a for m in messages for a in m.attachments)
    return dataclasses.replace(
        last,
        text=text,
        attachments=attachments,
        ack=ack_all,
        on_undeliverable=give_up_all if any(u for _, u in undeliverable) else None,
    )


class RunningTurns(Protocol):
    """What `Bursts` asks of the conversations: whether a turn runs, and its end."""

    def running(self, conversation: str) -> bool: ...

    async def idle(self, conversation: str) -> None: ...


@dataclass
class _Burst:
    """One conversation's held messages, where they go on to, and a wake-up for each."""

    then: HandOn
    items: list[Inbound] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)


Begun = Callable[[Inbound], Awaitable[bool]]
"""Whether a message's answer had begun before a restart (see the module)."""


async def never_begun(message: Inbound) -> bool:
    return False


def began_before(
    journal: TurnJournal | None,
    outbox: Outbox,
    handled: HandledLog,
    channels: Mapping[str, Channel],
) -> Begun:
    """A message's answer had begun before a restart when it was answered already (the
    handled record), or its turn journal, its reply in the outbox, or its channel's record
    of a streamed answer (`ShowsAnswers`) says so."""

    async def begun(inbound: Inbound) -> bool:
        if await handled.contains(inbound.channel, inbound.record):
            return True
        if journal is not None and await journal.holds(turn_key(inbound.channel, inbound.record)):
            return True
        if await outbox.get(inbound.channel, inbound.record) is not None:
            return True
        channel = channels.get(inbound.channel)
        return channel is not None and await _shows_begun(channel, inbound)

    return begun


async def _shows_begun(channel: Channel, inbound: Inbound) -> bool:
    return isinstance(channel, ShowsAnswers) and await channel.answer_begun(inbound)


class Bursts:
    """The stage merging the bursts of each conversation (see the module)."""

    def __init__(
        self,
        *,
        quiet_s: float,
        running: RunningTurns,
        begun: Begun = never_begun,
    ) -> None:
        self._quiet_s = quiet_s
        self._running = running
        self._begun = begun
        self._bursts: dict[str, _Burst] = {}

    async def take(self, message: Inbound, then: HandOn, later: Later) -> None:
        session = message.session_id
        if message.kind is not InboundKind.MESSAGE:
            await then(message)
            return
        if parse(message.command or message.text) is not None or await self._begun(message):
            waiting = self._bursts.pop(session, None)
            if waiting is not None and waiting.items:
                await then(merge(waiting.items))
                waiting.items = []
            await then(message)
            return
        burst = self._bursts.get(session)
        if burst is None:
            if not self._quiet_s and not self._running.running(session):
                await then(message)
                return
            burst = self._bursts[session] = _Burst(then)
            later(lambda: self._hold(session, burst))
        burst.items.append(message)
        burst.changed.set()

    async def _hold(self, session: str, burst: _Burst) -> None:
        while True:
            burst.changed = anyio.Event()
            with anyio.move_on_after(self._quiet_s) as quiet:
                await burst.changed.wait()
            if quiet.cancelled_caught or not self._quiet_s:
                break
        await self._running.idle(session)
        if self._bursts.get(session) is burst:
            del self._bursts[session]
        if burst.items:
            if len(burst.items) > 1:
                log.info("burst_merged", session=session, messages=len(burst.items))
            await burst.then(merge(burst.items))
