"""Scheduled runs, cron jobs, usage ledger lines and the API's stored replies come back
whole: arbitrary valid records (tests/support/records.py) written through the real store
into a fresh folder, read back by a new instance, compared as whole objects."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from hypothesis import given
from hypothesis import strategies as st

from squidd.core.cron import CronJob
from squidd.core.runs import PendingRun
from squidd.core.usage import Failover, UsageRecord
from squidd.store.cron_jobs import JobsFile
from squidd.store.idempotency import IdempotencyDir, StoredReply
from squidd.store.pending_runs import PendingRunsDir
from squidd.store.usage import UsageLedger
from tests.support.records import (
    EXAMPLES,
    cron_jobs,
    datetimes,
    failovers,
    folder,
    pending_runs,
    texts,
    usage_calls,
)


@EXAMPLES
@given(run=pending_runs)
def test_a_pending_run_comes_back_whole(run: PendingRun) -> None:
    async def main(data: Path) -> list[PendingRun]:
        await PendingRunsDir(data).put(run)
        return await PendingRunsDir(data).load()

    with folder() as data:
        assert anyio.run(main, data) == [run]


@EXAMPLES
@given(jobs=st.lists(cron_jobs, max_size=3))
def test_cron_jobs_come_back_whole(jobs: list[CronJob]) -> None:
    with folder() as data:
        JobsFile(data).modify_sync(lambda _: jobs)
        assert JobsFile(data).load_sync() == jobs


@EXAMPLES
@given(calls=st.lists(usage_calls, min_size=1, max_size=3), now=datetimes)
def test_usage_ledger_lines_come_back_whole(calls: list[dict[str, Any]], now: datetime) -> None:
    async def main(data: Path) -> tuple[str, list[UsageRecord]]:
        ledger = UsageLedger(data, now=lambda: now)
        for call in calls:
            await ledger.record(**call)
        return ledger.today(), await UsageLedger(data, now=lambda: now).read()

    with folder() as data:
        day, read = anyio.run(main, data)
    assert read == [
        UsageRecord(
            day,
            c["session"],
            c["model"],
            c["purpose"],
            c["prompt"],
            c["completion"],
            c["cached"],
            provider=c["provider"],
            agent=c["agent"],
            person=c["person"],
        )
        for c in calls
    ]


@EXAMPLES
@given(kept=st.lists(failovers, min_size=1, max_size=4), now=datetimes)
def test_the_days_failovers_come_back_whole(kept: list[Failover], now: datetime) -> None:
    async def main(data: Path) -> list[Failover]:
        ledger = UsageLedger(data, now=lambda: now)
        for failover in kept:
            await ledger.failed_over(failover)
        return await UsageLedger(data, now=lambda: now).failovers()

    with folder() as data:
        assert anyio.run(main, data) == kept


@EXAMPLES
@given(
    key_id=texts,
    key=texts,
    reply=st.builds(
        StoredReply,
        completion_id=texts,
        model=texts,
        text=texts,
        created=st.floats(min_value=0, max_value=2e10),
    ),
)
def test_an_api_reply_kept_by_its_idempotency_key_comes_back_whole(
    key_id: str, key: str, reply: StoredReply
) -> None:
    async def main(data: Path) -> StoredReply | None:
        store = IdempotencyDir(data, now=lambda: reply.created)
        await store.put(
            key_id, key, completion_id=reply.completion_id, model=reply.model, text=reply.text
        )
        return await IdempotencyDir(data, now=lambda: reply.created).get(key_id, key)

    with folder() as data:
        assert anyio.run(main, data) == reply


def test_a_usage_line_and_a_jobs_file_written_before_the_codecs_load(tmp_path: Path) -> None:
    (tmp_path / "usage").mkdir()
    (tmp_path / "usage" / "2026-03-01.jsonl").write_text(
        '{"day":"2026-03-01","session":"s","model":"m","purpose":"turn","prompt":7,'
        '"completion":1,"cached":2,"calls":3}\n'
    )
    read = anyio.run(UsageLedger(tmp_path).read)
    assert read == [UsageRecord("2026-03-01", "s", "m", "turn", 7, 1, 2, 3)]
    (tmp_path / "cron").mkdir()
    (tmp_path / "cron" / "jobs.json").write_text(
        '{"format": 1, "jobs": [{"name": "nightly", "prompt": "p", "kind": "cron",'
        ' "spec": "0 1 * * *", "timezone": "UTC", "target": null,'
        ' "created_at": "2026-03-01T10:00:00", "created_by": null,'
        ' "next_run": "2026-03-02T01:00:00+00:00", "last_run": null}]}'
    )
    (job,) = JobsFile(tmp_path).load_sync()
    assert job == CronJob(
        "nightly",
        "p",
        "cron",
        "0 1 * * *",
        "UTC",
        "",
        datetime(2026, 3, 1, 10, tzinfo=UTC),
        next_run=datetime(2026, 3, 2, 1, tzinfo=UTC),
    )
