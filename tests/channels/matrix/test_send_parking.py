"""The Matrix reply path under the router's poison parking: a failure the adapter's table
maps (the homeserver out of reach: `DeliveryError`) is retried past the attempt limit and
never parked, while an exception the table marks as a defect leaves the send unchanged and
is parked after `max_attempts` tries, never retried forever.

The send is the real one (`send_reply` over nio's `AsyncClient`, not logged in to any
server: its homeserver is a loopback port with nothing listening); for the defect, the
client's `room_send` raises nio's `TransferCancelledError`, which squidd never asks for."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import nio
import pytest
from nio.rooms import MatrixRoom

from squidd.channels.matrix.client import client_config
from squidd.channels.matrix.send import send_reply
from squidd.config.matrix import MatrixSettings
from squidd.core.models import ChannelName, Destination, Inbound, Outbound, SessionId, SourceId
from squidd.core.poison import PoisonGuard
from squidd.core.router import Router
from tests.support.doubles import MemoryAttempts, MemoryDeadLetters
from tests.support.router import build_router

pytestmark = pytest.mark.anyio

MAX_ATTEMPTS = 3
BOT = "@bot:example.org"
ROOM = "!room:example.org"


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound but not listening: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


class ReplyPath:
    """The Matrix channel's send, on a client whose room list holds the room."""

    name = "matrix"

    def __init__(self, port: int) -> None:
        homeserver = f"http://127.0.0.1:{port}"
        self.settings = MatrixSettings(
            enabled=True,
            homeserver=homeserver,
            user_id=BOT,
            access_token="syt_not_used_here",
            allowed_users=["@alice:example.org"],
        )
        # Configured as the channel configures its own (no retries inside nio).
        self.client = nio.AsyncClient(
            homeserver, BOT, device_id="DEV", config=client_config(self.settings)
        )
        self.client.access_token = "syt_not_used_here"
        self.client.rooms[ROOM] = MatrixRoom(ROOM, BOT)

    async def run(self, inbox: object, *, task_status: object) -> None:
        raise NotImplementedError

    async def send(self, outbound: Outbound) -> None:
        await send_reply(self.client, outbound, settings=self.settings, apply_trust=None)


def _router(channel: ReplyPath, dead: MemoryDeadLetters, waits: list[float]) -> Router:

    async def turn(message: Inbound) -> str:
        return "the answer"

    async def no_sleep(delay: float) -> None:
        waits.append(delay)
        await anyio.lowlevel.checkpoint()

    return build_router(
        turn,
        {"matrix": channel},
        poison=PoisonGuard(MemoryAttempts(), dead, max_attempts=MAX_ATTEMPTS),
        max_concurrent_turns=1,
        sleep=no_sleep,
    )


def _message() -> Inbound:
    return Inbound(
        ChannelName("matrix"),
        SourceId("$event1"),
        SessionId(ROOM),
        "@alice:example.org",
        "hello",
        reply_to=Destination(ChannelName("matrix"), ROOM),
    )


async def _until(check: Callable[[], bool]) -> None:
    with anyio.fail_after(20):
        while not check():  # noqa: ASYNC110 - polls state that has no event
            await anyio.sleep(0.005)


async def route_one(
    channel: ReplyPath, done: Callable[[MemoryDeadLetters, list[float]], bool]
) -> tuple[MemoryDeadLetters, list[float]]:
    """Route one message to `channel` until `done(dead letters, retry waits)`; the client
    closed after."""
    dead, waits = MemoryDeadLetters(), []
    router = _router(channel, dead, waits)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(router.run)
            await router.submit(_message())
            await _until(lambda: done(dead, waits))
            tg.cancel_scope.cancel()
    finally:
        await channel.client.close()
    return dead, waits


async def test_a_defect_from_the_send_is_parked_not_retried_forever(refusing_port: int) -> None:
    channel = ReplyPath(refusing_port)
    calls: list[str] = []

    async def cancelled(*args: Any, **kwargs: Any) -> None:
        calls.append("room_send")
        raise nio.TransferCancelledError

    channel.client.room_send = cancelled  # type: ignore[method-assign]
    dead, _ = await route_one(channel, lambda dead, waits: bool(dead.items))
    assert len(calls) == MAX_ATTEMPTS
    (item,) = dead.items.values()
    assert item.error == "TransferCancelledError" and item.attempts == MAX_ATTEMPTS


async def test_a_homeserver_out_of_reach_is_retried_past_the_limit(refusing_port: int) -> None:
    channel = ReplyPath(refusing_port)
    # Real refused connections, more of them than the attempts a defect gets.
    dead, _ = await route_one(channel, lambda dead, waits: len(waits) > 2 * MAX_ATTEMPTS)
    assert dead.items == {}
