"""The undecrypted queue under the router's poison rule: an event that opened late but fails
to be handed on with a defect is held again, counted, and after `max_attempts` parked and
let go (the sync position moves on); a passing failure is not counted; a count left by
earlier runs that never ended parks it without another try."""

from __future__ import annotations

from typing import Any

import pytest

from squidd.channels.matrix.ids import EventId, RoomId, SyncToken
from squidd.channels.matrix.state import SyncLedger
from squidd.channels.matrix.undecrypted import PARK_LOOP, Undecrypted, _Held
from squidd.core.poison import PoisonGuard, parked_id
from squidd.errors import TransientError
from tests.support.doubles import MemoryAttempts, MemoryDeadLetters

pytestmark = pytest.mark.anyio

EVENT = EventId("$late:example.org")
ROOM = RoomId("!room:example.org")


class _Event:
    sender = "@alice:example.org"


class Setup:
    def __init__(self, error: Exception | None) -> None:
        self.saved: list[str] = []

        async def save(token: SyncToken) -> None:
            self.saved.append(token)

        self.ledger = SyncLedger(save)
        self.batch = self.ledger.open(SyncToken("s1"))
        self.ledger.add(self.batch, EVENT)
        self.queue = Undecrypted(wait_s=60, monotonic=lambda: 0.0)
        self.item = _Held(ROOM, _Event(), self.batch, 0.0)  # type: ignore[arg-type]
        self.attempts = MemoryAttempts()
        self.dead = MemoryDeadLetters()
        self.poison = PoisonGuard(self.attempts, self.dead, max_attempts=3)
        self.error = error
        self.calls = 0

    async def deliver(self, batch: Any, room: RoomId, event: Any) -> bool:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return False

    async def hand_on(self) -> None:
        self.queue._held.pop(EVENT, None)  # as `retry` does before handing on
        await self.queue._hand_on(
            EVENT, self.item, object(), self.ledger, self.deliver, self.poison
        )


async def test_a_defect_is_held_again_then_parked_and_the_position_moves_on() -> None:
    s = Setup(ValueError("odd content"))
    await s.ledger.seal(s.batch)
    for attempt in (1, 2):
        await s.hand_on()
        assert EVENT in s.queue._held  # held again for the next batch
        assert s.attempts.counts[f"{PARK_LOOP}\0{EVENT}"][0] == attempt
        assert s.saved == []
    await s.hand_on()
    assert s.calls == 3
    assert EVENT not in s.queue._held
    assert s.saved == ["s1"]  # acked: the sync position moved past it
    (item,) = s.dead.items.values()
    assert item.id == parked_id("matrix", EVENT)
    assert (item.loop, item.error, item.attempts, item.retryable) == (
        "undecrypted",
        "ValueError",
        3,
        False,
    )
    assert "odd content" in item.reason and "@alice:example.org" in item.reason
    assert s.attempts.counts == {}


async def test_a_passing_failure_is_not_counted() -> None:
    s = Setup(TransientError("homeserver away"))
    with pytest.raises(TransientError):
        await s.hand_on()
    assert s.attempts.counts == {} and s.dead.items == {}


async def test_a_count_left_by_runs_that_never_ended_parks_without_a_try() -> None:
    s = Setup(None)
    s.attempts.counts[f"{PARK_LOOP}\0{EVENT}"] = (3, "")
    await s.ledger.seal(s.batch)
    await s.hand_on()
    assert s.calls == 0 and s.saved == ["s1"]
    assert [i.error for i in s.dead.items.values()] == ["Interrupted"]


async def test_a_late_event_handed_on_clears_its_count() -> None:
    s = Setup(None)
    await s.ledger.seal(s.batch)
    await s.hand_on()
    assert s.calls == 1 and s.saved == ["s1"]
    assert s.attempts.counts == {} and s.dead.items == {}
