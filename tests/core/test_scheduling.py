"""Schedules: crontab weekdays as users mean them, validation, heartbeat checklists and
active hours."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, time, timedelta

import anyio
import pytest
from structlog.testing import capture_logs

from squidd.core.scheduling import (
    CronJob,
    CronScheduler,
    Heartbeat,
    JobStore,
    following_run,
    has_open_items,
    make_job,
    parse_active_hours,
    parse_interval,
    within_hours,
)
from squidd.core.supervisor import ChildHealth
from tests.support.clock import FakeClock

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # a Monday
HOUR = timedelta(hours=1)


def job(**kwargs: str) -> object:
    return make_job("j", "p", timezone=kwargs.pop("timezone", "UTC"), target="", now=NOW, **kwargs)


@pytest.mark.parametrize(
    ("expr", "weekday"),
    [("0 8 * * 0", 6), ("0 8 * * 7", 6), ("0 8 * * 1", 0), ("0 8 * * sun", 6), ("0 8 * * 5", 4)],
)
def test_cron_weekdays_follow_crontab(expr: str, weekday: int) -> None:
    first = make_job("j", "p", cron=expr, timezone="UTC", target="", now=NOW).next_run
    assert first is not None and first.weekday() == weekday and first.hour == 8


def test_weekday_ranges_and_steps() -> None:
    j = make_job("j", "p", cron="0 9 * * 1-5", timezone="UTC", target="", now=NOW)
    runs = []
    at = NOW
    for _ in range(10):
        nxt = following_run(j, at)
        assert nxt is not None
        runs.append(nxt.weekday())
        at = nxt
    assert set(runs) == {0, 1, 2, 3, 4}
    weekend = make_job("w", "p", cron="0 9 * * 0,6", timezone="UTC", target="", now=NOW)
    assert weekend.next_run is not None and weekend.next_run.weekday() == 5


def test_cron_in_a_timezone() -> None:
    j = make_job("j", "p", cron="0 8 * * *", timezone="Europe/Berlin", target="", now=NOW)
    assert j.next_run == datetime(2026, 3, 3, 7, 0, tzinfo=UTC)


def test_every_and_at() -> None:
    every = make_job("e", "p", every="30m", timezone="UTC", target="", now=NOW)
    assert every.next_run == NOW + timedelta(minutes=30)
    assert following_run(every, NOW + timedelta(minutes=30)) == NOW + timedelta(minutes=60)
    at = make_job("a", "p", at="2026-03-02T14:00", timezone="Europe/Paris", target="", now=NOW)
    assert at.next_run == datetime(2026, 3, 2, 13, 0, tzinfo=UTC)
    assert following_run(at, NOW + timedelta(hours=2)) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression"),
        ({"cron": "* * *"}, "5 fields"),
        ({"every": "10s"}, "at least one minute"),
        ({"every": "often"}, "30m"),
        ({"at": "2020-01-01T00:00"}, "in the past"),
        ({"at": "tomorrow"}, "ISO 8601"),
        ({"cron": "* * * * *", "timezone": "Mars/Base"}, "unknown IANA timezone"),
        ({}, "exactly one"),
    ],
)
def test_invalid_jobs_are_refused_with_a_reason(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        job(**kwargs)


def test_job_names_cannot_be_paths() -> None:
    with pytest.raises(ValueError, match="job name"):
        make_job("../x", "p", every="1h", timezone="UTC", target="", now=NOW)


def test_parse_interval() -> None:
    assert parse_interval("2h") == timedelta(hours=2)
    assert parse_interval("1w") == timedelta(weeks=1)


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


@pytest.mark.anyio
async def test_heartbeat_after_a_long_suspend_beats_once_not_twice() -> None:
    """The machine slept through several intervals: one beat on waking, the next one a
    full interval later (two back to back would send the owner the same news twice)."""
    clock = FakeClock(NOW)
    fired: list[datetime] = []

    async def checklist() -> str:
        return "- [ ] water the plants\n"

    async def fire(prompt: str, when: datetime) -> None:
        fired.append(when)

    heartbeat = Heartbeat(
        interval=timedelta(minutes=30),
        active_hours=(time(0, 0), time(0, 0)),
        timezone="UTC",
        read_checklist=checklist,
        fire=fire,
        clock=clock,
    )
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
async def test_a_job_that_no_longer_parses_is_parked_not_fatal(job_store: JobStore) -> None:
    """A job whose timezone this machine no longer knows (tzdata changed, or the file was
    edited by hand): it is reported and parked, and the other jobs keep running. Before, the
    scheduler crashed on it, after firing it, and did the same again on every restart."""
    clock = FakeClock(NOW)
    store = job_store
    good = make_job("good", "g", every="1h", timezone="UTC", target="", now=NOW - HOUR)
    bad = replace(
        make_job("bad", "b", every="1h", timezone="UTC", target="", now=NOW - HOUR),
        timezone="Mars/Olympus_Mons",
    )
    await store.modify(lambda jobs: [bad, good])
    fired: list[str] = []

    async def fire(job: CronJob, when: datetime) -> None:
        fired.append(job.name)

    scheduler = CronScheduler(
        store, fire, clock=clock, misfire_grace=timedelta(minutes=5), poll_s=60
    )
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            await tg.start(scheduler.run, ChildHealth("cron"))
            with anyio.fail_after(5):
                while "good" not in fired:  # noqa: ASYNC110 - polls state that has no event
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert fired == ["good"]
    stored = {job.name: job for job in await store.load()}
    assert stored["bad"].next_run is None  # kept for the owner to fix, never run
    assert stored["good"].next_run == NOW + HOUR
    assert any(e["event"] == "cron_job_invalid" and e["job"] == "bad" for e in logs)
