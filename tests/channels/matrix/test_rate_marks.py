"""The status reactions when the account's rate budget is short, on a simulated clock, with
a client double that records the requests (the send path is the real one): a 👀 that is
still waiting for a token when its message's ✅ is queued is left out (no 👀, no redaction:
one event instead of three), the read receipt, which the homeserver does not limit, still
goes out at once; a 👀 that can be afforded is placed, and redacted when ✅ comes. A
reaction that answered a prompt is never marked."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from squidd.channels.matrix.ids import EventId, RoomId
from squidd.channels.matrix.own_reactions import ReactionKeys, StatusReactions
from squidd.channels.matrix.rate import Priority, RateBudget, bind
from tests.support.clock import FakeClock
from tests.support.matrix_marks import MarksClient as Client
from tests.support.matrix_marks import settle

pytestmark = pytest.mark.anyio

ROOM = RoomId("!room:example.org")


async def run_marks(spent: int, steps: Any) -> tuple[Client, StatusReactions]:
    clock = FakeClock()
    budget = RateBudget(0.2, 2, monotonic=clock.monotonic, sleep=clock.sleep)
    for _ in range(spent):
        assert budget.try_take(Priority.REPLY)
    client = Client()
    bind(client, budget)  # type: ignore[arg-type]  # the double stands in for nio's client
    marks = StatusReactions(enabled=True, receipts=True, keys=ReactionKeys())
    async with anyio.create_task_group() as tg:
        tg.start_soon(marks.run, client)
        await steps(marks, clock)
        for _ in range(10):
            clock.advance(5)
            await settle()
        tg.cancel_scope.cancel()
    return client, marks


async def test_a_taken_mark_short_of_a_token_is_left_out_when_the_answer_came_first() -> None:
    message = EventId("$m1")

    async def steps(marks: StatusReactions, clock: FakeClock) -> None:
        marks.taken(ROOM, message)
        await settle()  # its 👀 waits: the replies spent the budget
        marks.answered(ROOM, message)
        marks.settled(ROOM, message)
        await settle()

    client, marks = await run_marks(2, steps)
    assert client.requests == [("receipt", message), ("react ✅", message)]
    assert marks.skipped == 1


async def test_a_taken_mark_that_can_be_afforded_is_placed_then_replaced() -> None:
    message = EventId("$m1")

    async def steps(marks: StatusReactions, clock: FakeClock) -> None:
        marks.taken(ROOM, message)
        await settle()
        marks.answered(ROOM, message)
        marks.settled(ROOM, message)

    client, marks = await run_marks(0, steps)
    assert client.requests == [
        ("receipt", message),
        ("react 👀", message),
        ("redact", "$reaction2"),
        ("react ✅", message),
    ]
    assert marks.skipped == 0


async def test_a_message_never_taken_gets_no_mark() -> None:
    """An approval answered by a reaction is acknowledged but was never taken."""

    async def steps(marks: StatusReactions, clock: FakeClock) -> None:
        marks.settled(ROOM, EventId("$reaction-answer"))

    client, _ = await run_marks(0, steps)
    assert client.requests == []
