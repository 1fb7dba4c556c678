"""A message's marks follow one life (`message_marks.MessageMarks`): received, answered,
settled. Typing and the status reactions both follow it, and nothing else drives them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import pytest

from squidd.channels.matrix.ids import EventId, RoomId
from squidd.channels.matrix.message_marks import MessageMarks
from squidd.channels.matrix.own_reactions import ReactionKeys, StatusReactions
from squidd.channels.matrix.rate import RateBudget, bind
from squidd.channels.matrix.typing_notices import TypingNotices
from tests.support.clock import FakeClock
from tests.support.matrix_marks import MarksClient as Client
from tests.support.matrix_marks import settle

pytestmark = pytest.mark.anyio

ROOM = RoomId("!room:example.org")
Steps = Callable[[MessageMarks, Client], Awaitable[None]]


async def live(steps: Steps) -> list[tuple[str, str]]:
    """Run the marks of one connection through `steps`; what the client was asked."""
    clock = FakeClock()
    client = Client()
    budget = RateBudget(1, 10, monotonic=clock.monotonic, sleep=clock.sleep)
    bind(client, budget)  # type: ignore[arg-type]  # the double stands in for nio's client
    typing_notices = TypingNotices(
        enabled=True,
        monotonic=clock.monotonic,
        client=lambda: client,  # type: ignore[arg-type,return-value]
    )
    marks = MessageMarks(
        typing_notices, StatusReactions(enabled=True, receipts=True, keys=ReactionKeys())
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(marks.run, client)
        await settle()
        await steps(marks, client)
        await settle()
        tg.cancel_scope.cancel()
    return client.requests


def reactions(requests: list[tuple[str, str]]) -> list[str]:
    return [kind for kind, _ in requests if kind != "typing"]


def typing(requests: list[tuple[str, str]]) -> list[str]:
    return [state for kind, state in requests if kind == "typing"]


async def test_an_answered_message_shows_typing_then_its_check_mark() -> None:
    message = EventId("$m1")

    async def steps(marks: MessageMarks, client: Client) -> None:
        marks.received(ROOM, message)
        await settle()
        await marks.answered(ROOM, message)
        await settle()
        assert typing(client.requests) == ["on", "off"]  # the reply ends the typing
        await marks.settled(ROOM, message, failed=False)

    requests = await live(steps)
    assert reactions(requests) == ["receipt", "react 👀", "redact", "react ✅"]
    assert typing(requests) == ["on", "off"]


async def test_a_message_given_up_on_gets_the_cross_and_typing_stops() -> None:
    message = EventId("$m1")

    async def steps(marks: MessageMarks, client: Client) -> None:
        marks.received(ROOM, message)
        await settle()
        await marks.settled(ROOM, message, failed=True)  # refused for good, parked

    requests = await live(steps)
    assert reactions(requests) == ["receipt", "react 👀", "redact", "react ❌"]
    assert typing(requests) == ["on", "off"]


async def test_a_message_done_without_a_reply_of_its_own_gets_the_check_mark() -> None:
    message = EventId("$m1")

    async def steps(marks: MessageMarks, client: Client) -> None:
        marks.received(ROOM, message)  # an answer to an approval question, taken
        await settle()
        await marks.settled(ROOM, message, failed=False)

    requests = await live(steps)
    assert reactions(requests) == ["receipt", "react 👀", "redact", "react ✅"]
    assert typing(requests) == ["on", "off"]


async def test_typing_lasts_while_any_message_of_the_room_is_worked_on() -> None:
    first, second = EventId("$m1"), EventId("$m2")

    async def steps(marks: MessageMarks, client: Client) -> None:
        marks.received(ROOM, first)
        marks.received(ROOM, second)
        await settle()
        await marks.answered(ROOM, second)  # a burst's answer, through its later message
        await settle()
        assert typing(client.requests) == ["on"]  # the first one's turn goes on
        await marks.settled(ROOM, first, failed=False)
        await marks.settled(ROOM, second, failed=False)

    requests = await live(steps)
    assert typing(requests) == ["on", "off"]
    assert reactions(requests).count("react ❌") == 0
    assert reactions(requests).count("react ✅") == 2
