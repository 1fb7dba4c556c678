"""The `Channel` contract (`core.ports.Channel`), as checks any channel can be run through.

A `Harness` drives one channel from the outside, the way its protocol's far side would:
it delivers a message to the channel, reads whether the far side considers that message
acknowledged (IMAP `\\Seen`, the saved Matrix sync position, the double's list), sees a
reply arrive, and sets up a send the far side refuses for good. The checks hold for every
channel squidd runs:

- start: `run` signals `started` once it receives, having reported `CONNECTED` (readiness);
- inbound -> ack: a delivered message reaches the inbox as an `Inbound` of the channel with
  its source id and text; it is not acknowledged on receipt, nor by sending the reply, only
  by its `ack` (so a channel that acks before it sends fails here);
- send: the reply reaches the far side;
- refusal: a send the far side refuses for good raises a `PermanentError`;
- stop: cancelled, `run` returns within the gateway's shutdown grace, and a message it
  handed on but nobody answered stays unacknowledged (it comes back after a restart).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Protocol

import anyio
import pytest

from squidd.config.sections import GatewaySettings
from squidd.core.models import Inbound, Outbound
from squidd.core.ports import Channel, ChannelState
from squidd.errors import PermanentError
from tests.support.doubles import memory_poison

GRACE_S = GatewaySettings().shutdown_grace_s
WAIT_S = 60.0  # a bound for a broken run, not a speed assertion


class Harness(Protocol):
    """One channel and the far side of its protocol."""

    def make(self) -> Channel:
        """The channel under test (one per check)."""
        ...

    async def deliver(self, text: str) -> None:
        """The far side sends `text` to the channel (the channel is running)."""
        ...

    async def acknowledged(self, inbound: Inbound) -> bool:
        """Whether the far side considers `inbound` done (it would not come again)."""
        ...

    async def wait_reply(self, inbound: Inbound, text: str) -> None:
        """Until the far side holds a reply to `inbound` containing `text`."""
        ...

    async def refused(self, channel: Channel) -> Outbound:
        """An outbound the far side refuses for good (the channel is running)."""
        ...


class ContractInbox:
    """The router's side of `Inbox`: collects what the channel hands on, and its states."""

    def __init__(self) -> None:
        self.received: list[Inbound] = []
        self.states: list[ChannelState] = []
        self._arrived = anyio.Event()
        self.poison = memory_poison()

    async def put(self, message: Inbound) -> None:
        self.received.append(message)
        self._arrived.set()
        self._arrived = anyio.Event()

    def report(self, state: ChannelState, detail: str = "") -> None:
        self.states.append(state)

    async def next(self) -> Inbound:
        with anyio.fail_after(WAIT_S):
            while not self.received:
                await self._arrived.wait()
        return self.received.pop(0)


def reply_to(inbound: Inbound, text: str) -> Outbound:
    """What the router sends back for `inbound`."""
    destination = inbound.destination
    assert destination is not None, "an inbound message must say where its answer goes"
    return Outbound(
        channel=inbound.channel,
        target=destination.target,
        text=text,
        session_id=inbound.session_id,
        in_reply_to=inbound,
    )


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    with anyio.move_on_after(WAIT_S):
        while not await check():  # noqa: ASYNC110 - the far side's state: no event to wait on
            await anyio.sleep(0.05)
        return
    raise AssertionError(f"timed out waiting for: {what}")


@asynccontextmanager
async def running(channel: Channel, inbox: ContractInbox) -> AsyncIterator[None]:
    """The channel running for the block; a failed check comes out as itself, not inside
    the task group's exception group."""
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(WAIT_S):
            await tg.start(channel.run, inbox)
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - re-raised below as it is
            failure = exc
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def check_start_and_readiness(harness: Harness) -> None:
    channel = harness.make()
    inbox = ContractInbox()
    async with running(channel, inbox):
        assert ChannelState.CONNECTED in inbox.states, inbox.states
        assert channel.name


async def check_inbound_ack_and_send(harness: Harness) -> None:
    channel = harness.make()
    inbox = ContractInbox()
    async with running(channel, inbox):
        await harness.deliver("contract: are you there?")
        inbound = await inbox.next()
        assert inbound.channel == channel.name
        assert inbound.source_id
        assert "contract: are you there?" in inbound.text
        assert not await harness.acknowledged(inbound), "acknowledged before the reply was sent"
        await channel.send(reply_to(inbound, "contract: here I am"))
        await harness.wait_reply(inbound, "contract: here I am")
        assert not await harness.acknowledged(inbound), "acknowledged by the send, not the ack"
        await inbound.ack()
        await eventually(lambda: harness.acknowledged(inbound), "acknowledged after the ack")


async def check_refusal_is_permanent(harness: Harness) -> None:
    channel = harness.make()
    inbox = ContractInbox()
    async with running(channel, inbox):
        outbound = await harness.refused(channel)
        with pytest.raises(PermanentError):
            await channel.send(outbound)


async def check_stop_within_grace(harness: Harness) -> None:
    channel = harness.make()
    inbox = ContractInbox()
    stopping, stopped = anyio.Event(), anyio.Event()

    async def serve(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            async with anyio.create_task_group() as inner:
                with anyio.fail_after(WAIT_S):
                    await inner.start(channel.run, inbox)
                task_status.started()
                await stopping.wait()
                inner.cancel_scope.cancel()
        finally:
            stopped.set()

    async with anyio.create_task_group() as tg:
        await tg.start(serve)
        await harness.deliver("contract: nobody answers this one")
        inbound = await inbox.next()
        stopping.set()
        with anyio.move_on_after(GRACE_S) as waited:
            await stopped.wait()
        tg.cancel_scope.cancel()
    assert not waited.cancelled_caught, f"{channel.name} did not stop within {GRACE_S:g} s"
    assert not await harness.acknowledged(inbound), "an unanswered message was acknowledged"


CHECKS = (
    check_start_and_readiness,
    check_inbound_ack_and_send,
    check_refusal_is_permanent,
    check_stop_within_grace,
)
