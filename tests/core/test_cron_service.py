"""The one cron service (core/cron_service.py) the cron tools, `squidd cron` and the
dashboard share: its checks and its words; pause then resume keeps the schedule; run now
fires once and leaves the schedule; a change is told (`changed`) every time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from squidd.core.cron import CronJob, JobListError, NoSuchJob
from squidd.core.cron_service import NOT_RUNNING, CronJobs
from squidd.core.ports import JobStore

pytestmark = pytest.mark.anyio
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _service(store: JobStore, fired: list[tuple[str, datetime]] | None = None) -> CronJobs:
    async def run_now(job: CronJob, when: datetime) -> None:
        assert fired is not None
        fired.append((job.name, when))

    return CronJobs(
        store,
        default_timezone="Europe/Berlin",
        run_now=run_now if fired is not None else None,
        clock=lambda: NOW,
    )


async def test_add_list_remove_say_the_same_words_everywhere(job_store: JobStore) -> None:
    told: list[int] = []
    jobs = CronJobs(
        job_store,
        default_timezone="Europe/Berlin",
        changed=lambda: told.append(1),
        clock=lambda: NOW,
    )
    assert await jobs.listing() == "No scheduled jobs."
    said = await jobs.add("tea", "tea time", every="2h", target="matrix:!r:x", created_by="cli")
    assert said == (
        "Scheduled. tea: every 2h (Europe/Berlin); next 2026-03-02T14:00+00:00; "
        "to matrix:!r:x; prompt: tea time"
    )
    assert await jobs.listing() == said.removeprefix("Scheduled. ")
    with pytest.raises(JobListError, match="a job named 'tea' exists"):
        await jobs.add("tea", "again", every="1h")
    with pytest.raises(ValueError, match="at least one minute"):
        await jobs.add("fast", "x", every="30s")
    with pytest.raises(NoSuchJob, match="no job named 'coffee'"):
        await jobs.remove("coffee")
    assert await jobs.remove("tea") == "Removed job 'tea'."
    assert await job_store.load() == []
    assert told == [1, 1]  # each change made, none refused


async def test_pause_then_resume_keeps_the_schedule(job_store: JobStore) -> None:
    jobs = _service(job_store)
    await jobs.add("tea", "tea time", cron="0 8 * * mon-fri")
    [before] = await job_store.load()
    assert await jobs.pause("tea") == "Paused job 'tea'; it keeps its schedule."
    [paused] = await job_store.load()
    assert paused.paused and paused.next_run == before.next_run
    assert "; paused;" in await jobs.listing()
    said = await jobs.resume("tea")
    assert said.startswith("Resumed job 'tea'; tea: cron 0 8 * * mon-fri (Europe/Berlin); next")
    [after] = await job_store.load()
    assert after == before  # the same job, the same next run: nothing but the flag moved
    with pytest.raises(NoSuchJob):
        await jobs.pause("coffee")


async def test_run_now_fires_once_and_leaves_the_schedule(job_store: JobStore) -> None:
    fired: list[tuple[str, datetime]] = []
    jobs = _service(job_store, fired)
    await jobs.add("tea", "tea time", every="1h")
    [before] = await job_store.load()
    assert await jobs.run_now("tea") == "Job 'tea' runs now; its schedule is unchanged."
    assert fired == [("tea", NOW)]
    assert await job_store.load() == [before]
    with pytest.raises(NoSuchJob):
        await jobs.run_now("coffee")
    assert fired == [("tea", NOW)]


async def test_run_now_without_the_daemon_is_refused_with_the_reason(job_store: JobStore) -> None:
    jobs = _service(job_store)
    await jobs.add("tea", "tea time", every="1h")
    with pytest.raises(JobListError) as refused:
        await jobs.run_now("tea")
    assert str(refused.value) == NOT_RUNNING
    assert (await job_store.load())[0].next_run == NOW + timedelta(hours=1)
