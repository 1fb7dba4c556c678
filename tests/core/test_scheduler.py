"""The cron scheduler: due jobs fire, and one broken job does not stop the others."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from structlog.testing import capture_logs

from squidd.core.cron import CronJob, make_job
from squidd.core.ports import JobStore
from squidd.core.scheduler import CronScheduler
from squidd.core.supervisor import ChildHealth
from squidd.store.cron_jobs import JOB
from tests.support.clock import FakeClock

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


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


@pytest.mark.anyio
async def test_a_paused_job_does_not_fire_and_keeps_its_schedule(job_store: JobStore) -> None:
    clock = FakeClock(NOW)
    running = make_job("running", "r", every="1h", timezone="UTC", target="", now=NOW - HOUR)
    paused = replace(
        make_job("paused", "p", every="1h", timezone="UTC", target="", now=NOW - HOUR),
        paused=True,
    )
    await job_store.modify(lambda jobs: [paused, running])
    fired: list[str] = []

    async def fire(job: CronJob, when: datetime) -> None:
        fired.append(job.name)

    scheduler = CronScheduler(
        job_store, fire, clock=clock, misfire_grace=timedelta(minutes=5), poll_s=60
    )
    async with anyio.create_task_group() as tg:
        await tg.start(scheduler.run, ChildHealth("cron"))
        with anyio.fail_after(5):
            while "running" not in fired:  # noqa: ASYNC110 - polls state that has no event
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert fired == ["running"]
    stored = {job.name: job for job in await job_store.load()}
    assert stored["paused"].paused and stored["paused"].next_run == NOW
    assert JOB.load(JOB.dump(stored["paused"])).paused
