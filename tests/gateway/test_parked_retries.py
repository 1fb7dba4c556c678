"""The daemon's side of `squidd parked retry`: a requested item goes through the router once
(its kept reply sent without a turn, or the turn run again), an item taken before a crash is
taken again under the same record and not sent twice, a failing retry is parked again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from squidd.core.models import Inbound, PendingReply, SessionId
from squidd.core.poison import Parked, ParkState, PoisonGuard, parked_id
from squidd.core.supervisor import ChildHealth
from squidd.gateway.parked import ParkedRetries, record_id
from squidd.store.parked import ParkedDir
from tests.core.test_poison import Flaky
from tests.support.doubles import MemoryAttempts
from tests.support.router import Records, build_router

pytestmark = pytest.mark.anyio


def parked(*, reply: bool = True) -> Parked:
    inbound = Inbound("c", "m1", SessionId("s"), "u", "text 1", subject="Hi")
    return Parked(
        id=parked_id("c", "m1"),
        loop="message",
        channel="c",
        source_id="m1",
        session_id="s",
        reason="ValueError: bad",
        error="ValueError",
        attempts=3,
        inbound=inbound,
        reply=PendingReply("c", "u", "kept reply", SessionId("s")) if reply else None,
    )


class Setup:
    def __init__(self, tmp_path: Path, channel: Flaky) -> None:
        self.turns: list[str] = []

        async def turn(message: Inbound) -> str:
            self.turns.append(message.text)
            return f"new: {message.text}"

        self.records = Records()
        self.folder = ParkedDir(tmp_path)
        self.channel = channel
        self.router = build_router(
            turn,
            {"c": channel},
            records=self.records,
            poison=PoisonGuard(MemoryAttempts(), self.folder, max_attempts=2),
            health_of=ChildHealth,
        )
        self.retries = ParkedRetries(self.folder, self.records, self.router, poll_s=0.01)


async def until(check: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not check():  # noqa: ASYNC110 - polls state that has no event
            await anyio.sleep(0.005)


async def test_a_requested_retry_sends_the_kept_reply_once_and_removes_the_item(
    tmp_path: Path,
) -> None:
    s = Setup(tmp_path, Flaky(set(), ValueError))
    s.folder.park_sync(parked())
    s.folder.change_sync(parked().id, lambda p: p.with_state(ParkState.RETRY))
    async with anyio.create_task_group() as tg:
        await tg.start(s.router.run)
        await tg.start(s.retries.run)
        await until(lambda: s.folder.list_sync() == [])
        await anyio.sleep(0.05)  # a few more polls: nothing is taken twice
        tg.cancel_scope.cancel()
    assert [o.text for o in s.channel.sent] == ["kept reply"]
    assert s.channel.sent[0].in_reply_to is not None
    assert s.channel.sent[0].in_reply_to.source_id == "m1"  # threads on the original
    assert s.turns == []
    assert await s.records.contains("c", "parked:" + parked().id + ":1")


async def test_without_a_kept_reply_the_turn_runs_again(tmp_path: Path) -> None:
    s = Setup(tmp_path, Flaky(set(), ValueError))
    s.folder.park_sync(parked(reply=False))
    s.folder.change_sync(parked().id, lambda p: p.with_state(ParkState.RETRY))
    async with anyio.create_task_group() as tg:
        await tg.start(s.router.run)
        assert await s.retries.take() == 1
        await until(lambda: s.folder.list_sync() == [])
        tg.cancel_scope.cancel()
    assert s.turns == ["text 1"] and [o.text for o in s.channel.sent] == ["new: text 1"]


async def test_an_item_taken_before_a_crash_is_not_sent_twice(tmp_path: Path) -> None:
    """Taken (retrying, retry 1), delivered and recorded, then the daemon died before the
    item was removed: the next start takes it under the same record and only settles it."""
    s = Setup(tmp_path, Flaky(set(), ValueError))
    s.folder.park_sync(parked())
    taken = s.folder.change_sync(parked().id, lambda p: p.with_state(ParkState.RETRYING, retries=1))
    await s.records.add("c", record_id(taken.with_state(ParkState.RETRYING, retries=1)))
    async with anyio.create_task_group() as tg:
        await tg.start(s.router.run)
        assert await s.retries.take() == 1
        await until(lambda: s.folder.list_sync() == [])
        tg.cancel_scope.cancel()
    assert s.channel.sent == []


async def test_a_retry_that_fails_again_is_parked_again(tmp_path: Path) -> None:
    s = Setup(tmp_path, Flaky({"kept reply"}, lambda: ValueError("still bad")))
    s.folder.park_sync(parked())
    s.folder.change_sync(parked().id, lambda p: p.with_state(ParkState.RETRY))
    async with anyio.create_task_group() as tg:
        await tg.start(s.router.run)
        assert await s.retries.take() == 1
        await until(lambda: s.folder.list_sync()[0].state is ParkState.PARKED)
        assert await s.retries.take() == 0
        tg.cancel_scope.cancel()
    (item,) = s.folder.list_sync()
    assert (item.retries, item.attempts) == (1, 2)
    assert "still bad" in item.reason
    assert item.reply is not None and item.reply.text == "kept reply"
    assert len(s.channel.tries) == 2
