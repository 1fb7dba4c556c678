"""The poison ports' contracts (`core.poison.AttemptLog`, `core.poison.DeadLetters`): the
files and the doubles agree on counts, reasons, clearing, and what a second parking keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.core.models import ChannelName, Inbound, PendingReply, SessionId, SourceId
from squidd.core.poison import Parked, ParkState
from squidd.store.attempts import AttemptsDir
from squidd.store.parked import ParkedDir
from tests.support.doubles import MemoryAttempts, MemoryDeadLetters

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["file", "double"])
def attempts(request: pytest.FixtureRequest, tmp_path: Path) -> AttemptsDir | MemoryAttempts:
    return AttemptsDir(tmp_path) if request.param == "file" else MemoryAttempts()


@pytest.fixture(params=["file", "double"])
def dead(request: pytest.FixtureRequest, tmp_path: Path) -> ParkedDir | MemoryDeadLetters:
    return ParkedDir(tmp_path) if request.param == "file" else MemoryDeadLetters()


def kept(dead: ParkedDir | MemoryDeadLetters, item_id: str) -> Parked:
    return dead.get_sync(item_id) if isinstance(dead, ParkedDir) else dead.items[item_id]


async def test_counts_and_reasons(attempts: AttemptsDir | MemoryAttempts) -> None:
    key = "email\0<1@x>"
    assert await attempts.get(key) == (0, "")
    await attempts.set(key, 1, "")
    await attempts.set(key, 2, "ValueError: x")
    assert await attempts.get(key) == (2, "ValueError: x")
    assert await attempts.get("email\0<2@x>") == (0, "")
    await attempts.clear(key)
    await attempts.clear(key)  # clearing twice is no error
    assert await attempts.get(key) == (0, "")


ITEM = Parked(
    id="0123456789ab",
    loop="message",
    channel="email",
    source_id="<1@x>",
    session_id="a@x",
    reason="ValueError: bad",
    error="ValueError",
    attempts=3,
    inbound=Inbound(ChannelName("email"), SourceId("<1@x>"), SessionId("a@x"), "a@x", "hi"),
    reply=PendingReply("email", "a@x", "hello", SessionId("a@x")),
)


async def test_parking_again_replaces_but_keeps_retries_and_reply(
    dead: ParkedDir | MemoryDeadLetters,
) -> None:
    await dead.park(ITEM)
    assert kept(dead, ITEM.id) == ITEM
    retried = ITEM.with_state(ParkState.RETRYING, retries=2)
    if isinstance(dead, ParkedDir):
        await dead.change(ITEM.id, lambda p: retried)
    else:
        dead.items[ITEM.id] = retried
    await dead.park(ITEM.with_state(ParkState.PARKED, reply=None, reason="KeyError: k"))
    again = kept(dead, ITEM.id)
    assert (again.state, again.retries, again.reason) == (ParkState.PARKED, 2, "KeyError: k")
    assert again.reply == ITEM.reply and again.inbound == ITEM.inbound
