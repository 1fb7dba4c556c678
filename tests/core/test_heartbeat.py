"""The heartbeat: which checklists have open items, active hours, and no catch-up of beats
missed while the machine slept."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, time, timedelta
from typing import Any

import anyio
import pytest

from squidd.core.heartbeat import Heartbeat, has_open_items, parse_active_hours, within_hours
from squidd.core.supervisor import ChildHealth
from tests.support.clock import FakeClock

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "open_items"),
    [
        ("", False),
        ("# Heartbeat\n\nCheck these when it makes sense.\n", False),
        ("<!--\n- [ ] example item\n-->\n", False),
        ("- [x] done\n- [X] also done\n- [ ]   \n", False),
        ("- [ ] water the plants\n", True),
        ("* look at the inbox\n", True),
        ("1. call mum\n", True),
    ],
)
def test_open_items(text: str, open_items: bool) -> None:
    assert has_open_items(text) is open_items


def test_active_hours() -> None:
    day = parse_active_hours("08:00-22:00")
    assert within_hours(time(8, 0), day) and not within_hours(time(22, 0), day)
    night = parse_active_hours("22:00-06:00")
    assert within_hours(time(23, 30), night) and within_hours(time(5, 59), night)
    assert not within_hours(time(12, 0), night)
    always = parse_active_hours("00:00-24:00")
    assert within_hours(time(23, 59), always)


def half_hourly(
    checklist: Callable[[], Awaitable[str]],
    fired: list[datetime],
    clock: FakeClock,
    **extra: Any,
) -> Heartbeat:
    """A heartbeat every 30 minutes at any hour (UTC) that notes when each beat fires."""

    async def fire(prompt: str, when: datetime) -> None:
        fired.append(when)

    return Heartbeat(
        interval=timedelta(minutes=30),
        active_hours=(time(0, 0), time(0, 0)),
        timezone="UTC",
        read_checklist=checklist,
        fire=fire,
        clock=clock,
        **extra,
    )


@pytest.mark.anyio
async def test_heartbeat_after_a_long_suspend_beats_once_not_twice() -> None:
    """The machine slept through several intervals: one beat on waking, the next one a
    full interval later (two back to back would send the owner the same news twice)."""
    clock = FakeClock(NOW)
    fired: list[datetime] = []

    async def checklist() -> str:
        return "- [ ] water the plants\n"

    heartbeat = half_hourly(checklist, fired, clock)
    async with anyio.create_task_group() as tg:
        await tg.start(heartbeat.run, ChildHealth("heartbeat"))
        clock.advance(5 * 3600)  # asleep for five hours
        with anyio.fail_after(5):
            while not fired:  # noqa: ASYNC110 - polls state that has no event
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert len(fired) == 1
    assert heartbeat.next_beat == clock.now() + timedelta(minutes=30)


@pytest.mark.anyio
async def test_heartbeat_skips_its_call_when_nothing_changed_since_its_last_run() -> None:
    """Same checklist and no other turn since the last run: no model call. A new turn
    elsewhere, or an edited checklist, brings the next beat back."""
    checklist_text = ["- [ ] water the plants\n"]
    turns = [0]
    fired: list[datetime] = []

    async def checklist() -> str:
        return checklist_text[0]

    heartbeat = half_hourly(checklist, fired, FakeClock(NOW), activity=lambda: turns[0])
    assert await heartbeat.beat(NOW) is True
    assert await heartbeat.beat(NOW + timedelta(minutes=30)) is False
    turns[0] += 1  # the owner wrote in a room
    assert await heartbeat.beat(NOW + timedelta(minutes=60)) is True
    assert await heartbeat.beat(NOW + timedelta(minutes=90)) is False
    checklist_text[0] += "- [ ] pay the rent\n"
    assert await heartbeat.beat(NOW + timedelta(minutes=120)) is True
    assert len(fired) == 3
