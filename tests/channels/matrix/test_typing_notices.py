"""Typing notices against a real homeserver: an acknowledgement that ends a room's turn
while the typing loop is refreshing another room must not crash the channel (this happened
on every restart that met pending redeliveries: the acks come in quick succession)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from nio import AsyncClient

from squidd.channels.matrix.typing_notices import TypingNotices
from tests.servers.synapse.server import SynapseServer, User

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


class _AckDuringTyping(AsyncClient):
    """The bot's real client; while its first typing request is on the wire, the turn of
    another room ends (the router acks it), as happens between two awaits in real life."""

    def __init__(self, *args: Any, during_first: Callable[[], Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.typing_calls: list[tuple[str, bool]] = []
        self._during_first = during_first

    async def room_typing(self, room_id: str, typing_state: bool = True, timeout: int = 30000):  # type: ignore[no-untyped-def]
        self.typing_calls.append((room_id, typing_state))
        if len(self.typing_calls) == 1:
            await self._during_first()
        return await super().room_typing(room_id, typing_state, timeout)


async def test_an_ack_during_the_typing_refresh_does_not_crash_the_loop(
    synapse: SynapseServer, bot: User, make_human: MakeHuman
) -> None:
    alice = await make_human("alice")
    rooms = [await alice.create_room([bot.user_id], name=f"r{i}") for i in range(2)]
    for room in rooms:
        synapse.call("POST", f"/_matrix/client/v3/join/{room}", {}, token=bot.access_token)

    async def ack_second_room() -> None:
        await typing.stop(rooms[1], "$two")

    client = _AckDuringTyping(synapse.url, bot.user_id, during_first=ack_second_room)
    client.restore_login(bot.user_id, bot.device_id, bot.access_token)
    typing = TypingNotices(enabled=True, monotonic=time.monotonic, client=lambda: client)
    # Two rooms with a turn in progress each, as after a restart with redeliveries.
    typing.start(rooms[0], "$one")
    typing.start(rooms[1], "$two")
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(typing.run, client)
            with anyio.fail_after(30):  # a guard against hanging, not a timing assertion
                while len(client.typing_calls) < 2:  # noqa: ASYNC110 - no event to wait on
                    await anyio.sleep(0.01)
            # One more round: the loop is alive and keeps the first room's notice up.
            with anyio.fail_after(30):
                while client.typing_calls.count((rooms[0], True)) < 2:
                    typing.wake()
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    finally:
        await client.close()
    # The second room got its "stopped" notice from the ack, and nothing more.
    assert client.typing_calls[:2] == [(rooms[0], True), (rooms[1], False)]
    assert (rooms[1], True) not in client.typing_calls
