"""One lifecycle for the marks a person's message gets while it is answered.

A message handed to the inbox is `received`: its room shows the bot typing
(`typing_notices`), and it gets a read receipt and 👀 (`own_reactions.StatusReactions`).
When its reply went out it is `answered`: ✅, and its typing lease is given back. When the
pipeline acknowledged it, it is `settled`: the lease is given back if it was still held;
a message settled as done without a reply of its own (an answer to an approval question,
taken; one of a burst answered through a later message) gets ✅, one given up on (its reply
refused for good, the message parked) ❌. Every mark follows these three steps and nothing
else drives them: the connection calls `received` and `settled` (`ack` and
`on_undeliverable`), the channel's `send` calls `answered`.
A reaction that answers an approval prompt is never `received` (it gets no marks), and
so its settling marks nothing.

`run` sends the marks for one connection: the typing refresh and the status reactions'
queue, side by side.
"""

from __future__ import annotations

import anyio
from nio import AsyncClient

from squidd.channels.matrix.ids import EventId, RoomId
from squidd.channels.matrix.own_reactions import StatusReactions
from squidd.channels.matrix.typing_notices import TypingNotices

__all__ = ["MessageMarks"]


class MessageMarks:
    """The typing notices and status reactions of the messages being answered."""

    def __init__(self, typing: TypingNotices, reactions: StatusReactions) -> None:
        self._typing = typing
        self._reactions = reactions

    def received(self, room_id: RoomId, event_id: EventId) -> None:
        """Handed to the inbox: typing in its room, a read receipt and 👀 on it."""
        self._reactions.taken(room_id, event_id)
        self._typing.start(room_id, event_id)

    async def answered(self, room_id: RoomId, event_id: EventId) -> None:
        """Its reply went out: ✅ (once), and its typing lease given back."""
        self._reactions.answered(room_id, event_id)
        await self._typing.stop(room_id, event_id)

    async def settled(self, room_id: RoomId, event_id: EventId, *, failed: bool) -> None:
        """Acknowledged (`failed`: given up on): ✅ unless answered already, ❌ when given up
        on, and its typing lease given back."""
        self._reactions.settled(room_id, event_id, failed=failed)
        await self._typing.stop(room_id, event_id)

    async def run(self, client: AsyncClient) -> None:
        """Send the marks while `client` is connected."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._reactions.run, client)
            await self._typing.run(client)
