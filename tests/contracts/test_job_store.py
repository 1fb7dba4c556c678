"""The job store contract (`core.ports.JobStore`): the jobs file and the double agree."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from squidd.core.cron import CronJob, make_job
from squidd.core.ports import JobStore

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 11, 23, 1, 0, tzinfo=UTC)


def job(name: str) -> CronJob:
    return make_job(name, f"prompt {name}", cron="0 9 * * *", timezone="UTC", target="", now=NOW)


async def test_empty(job_store: JobStore) -> None:
    assert await job_store.load() == []


async def test_modify_gets_the_current_jobs_and_its_result_is_stored(job_store: JobStore) -> None:
    seen: list[list[CronJob]] = []

    def add(name: str) -> Callable[[list[CronJob]], list[CronJob]]:
        def change(current: list[CronJob]) -> list[CronJob]:
            seen.append(list(current))
            return [*current, job(name)]

        return change

    assert await job_store.modify(add("a")) == [job("a")]
    assert await job_store.modify(add("b")) == [job("a"), job("b")]
    assert seen == [[], [job("a")]]
    assert await job_store.load() == [job("a"), job("b")]


async def test_the_version_changes_with_every_modify_and_only_then(job_store: JobStore) -> None:
    first = await job_store.version()
    assert await job_store.version() == first
    await job_store.modify(lambda _: [job("a")])
    second = await job_store.version()
    assert second != first
    await job_store.load()
    assert await job_store.version() == second
    await job_store.modify(lambda jobs: [*jobs, job("b")])
    assert await job_store.version() not in (first, second)


async def test_a_change_that_raises_changes_nothing(job_store: JobStore) -> None:
    await job_store.modify(lambda _: [job("a")])
    version = await job_store.version()

    def refuse(current: list[CronJob]) -> list[CronJob]:
        current.clear()
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await job_store.modify(refuse)
    assert await job_store.load() == [job("a")]
    assert await job_store.version() == version


async def test_a_loaded_list_is_the_callers_own(job_store: JobStore) -> None:
    await job_store.modify(lambda _: [job("a")])
    (await job_store.load()).clear()
    (await job_store.modify(lambda jobs: jobs)).clear()
    assert await job_store.load() == [job("a")]
