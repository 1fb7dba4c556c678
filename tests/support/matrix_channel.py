"""A `MatrixChannel` run in this process for the Matrix tests, with a small inbox that
answers through `channel.send` and then acks, the way the gateway's router does; the
`alice_allowed` fixture: Alice and the channel settings that answer her."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from squidd.channels.matrix import MatrixChannel
from squidd.config.matrix import MatrixSettings
from squidd.core.models import Inbound, Outbound
from squidd.core.ports import ChannelState, MediaSink
from squidd.errors import DeliveryError
from squidd.gateway.pipeline import Pipeline
from tests.servers.synapse.server import SynapseServer, User
from tests.support.doubles import memory_poison
from tests.support.matrix import Human, bot_settings, wait_until

Responder = Callable[[Inbound], str]


def echo(message: Inbound) -> str:
    return f"echo: {message.text}"


class AnsweringInbox:
    """Answers every inbound through `channel.send`, then acks it (the router's contract)."""

    def __init__(self, channel: MatrixChannel, tg: TaskGroup, responder: Responder) -> None:
        self.channel = channel
        self.responder = responder
        self.received: list[Inbound] = []
        self.states: list[tuple[ChannelState, str]] = []
        self.answered: list[str] = []
        self.acked: list[str] = []
        self.gate: anyio.Event | None = None
        self._tg = tg
        self.poison = memory_poison()

    async def put(self, message: Inbound) -> None:
        self.received.append(message)
        self._tg.start_soon(self._answer, message)

    def report(self, state: ChannelState, detail: str = "") -> None:
        self.states.append((state, detail))

    async def _answer(self, message: Inbound) -> None:
        if self.gate is not None:
            await self.gate.wait()
        try:
            await self.channel.send(
                Outbound(
                    channel="matrix",
                    target=message.reply_to.target if message.reply_to else message.sender,
                    text=self.responder(message),
                    session_id=message.session_id,
                    in_reply_to=message,
                )
            )
        except DeliveryError:
            if self.channel.client is not None:
                raise
            return  # the channel stopped first (the test ended): a daemon keeps it to send
        self.answered.append(message.source_id)
        await message.ack()
        self.acked.append(message.source_id)

    async def all_acked(self) -> None:
        """Wait until every message received so far was answered and acked."""
        await wait_until(lambda: len(self.acked) >= len(self.received), "all acked")

    def texts(self) -> list[str]:
        return [m.text for m in self.received]


@asynccontextmanager
async def run_channel(
    settings: MatrixSettings,
    data_dir: Path,
    responder: Responder = echo,
    *,
    media: MediaSink | None = None,
    max_download_bytes: int = 8 * 1024 * 1024,
) -> AsyncIterator[tuple[MatrixChannel, AnsweringInbox]]:
    channel = MatrixChannel(settings, data_dir, media=media, max_download_bytes=max_download_bytes)
    async with anyio.create_task_group() as tg:
        inbox = AnsweringInbox(channel, tg, responder)
        # The channel's own stages (a thread's root) before the inbox, as in the daemon.
        pipeline = Pipeline(channel.stages(), inbox)
        await tg.start(pipeline.run)
        with anyio.fail_after(60):
            await tg.start(channel.run, pipeline)
        try:
            yield channel, inbox
        finally:
            tg.cancel_scope.cancel()


# Alice (on matrix-nio) and the bot's channel settings that answer her.
AliceAllowed = tuple[Human, MatrixSettings]


@pytest.fixture
async def alice_allowed(
    synapse: SynapseServer, bot: User, make_human: Callable[..., Any]
) -> AliceAllowed:
    alice: Human = await make_human("alice")
    return alice, bot_settings(synapse, bot, allowed_users=[alice.user_id])
