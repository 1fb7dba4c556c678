"""The cron jobs file: round trips, concurrent edits from two processes' worth of threads,
and a file that cannot be read is reported and never replaced by an empty list."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from squidd.core.cron import CronJob, make_job
from squidd.errors import StorageError
from squidd.store.cron_jobs import JobsFile

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 11, 23, 1, 0, tzinfo=UTC)


def job(name: str, target: str = "") -> CronJob:
    return make_job(name, f"prompt of {name}", every="1h", timezone="UTC", target=target, now=NOW)


async def test_no_file_means_no_jobs_and_an_unchanged_version(tmp_path: Path) -> None:
    jobs = JobsFile(tmp_path)
    assert await jobs.load() == []
    assert await jobs.version() is None
    assert not jobs.path.exists()


async def test_modify_writes_what_load_reads_and_changes_the_version(tmp_path: Path) -> None:
    jobs = JobsFile(tmp_path)
    written = await jobs.modify(lambda _: [job("a"), job("b", "matrix:!r:x")])
    assert await jobs.load() == written
    before = await jobs.version()
    await jobs.modify(lambda current: [*current, job("c")])
    assert await jobs.version() != before
    assert [j.name for j in await JobsFile(tmp_path).load()] == ["a", "b", "c"]
    data = json.loads(jobs.path.read_text(encoding="utf-8"))
    assert data["format"] == 1
    assert [item["name"] for item in data["jobs"]] == ["a", "b", "c"]


async def test_a_file_written_before_this_version_is_read(tmp_path: Path) -> None:
    path = tmp_path / "cron" / "jobs.json"
    path.parent.mkdir()
    path.write_text(
        '{"format": 1, "jobs": [{"name": "n", "prompt": "p", "kind": "every", "spec": "1h",'
        ' "timezone": "UTC", "target": "", "created_at": "2026-11-23T01:00:00+00:00",'
        ' "created_by": "", "next_run": "2026-11-23T02:00:00+00:00", "last_run": null}]}\n'
    )
    (loaded,) = await JobsFile(tmp_path).load()
    assert (loaded.name, loaded.spec, loaded.next_run) == (
        "n",
        "1h",
        datetime(2026, 11, 23, 2, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    "content",
    [
        '{"format": 1, "jobs": [{"name": "n", "pro',  # torn
        "[]",
        '{"jobs": []}',  # no format
        '{"format": 2, "jobs": []}',  # from a newer version
        '{"format": 1, "jobs": [{"name": "n"}]}',
        '{"format": 1, "jobs": "none"}',
    ],
)
async def test_an_unreadable_file_is_reported_and_never_overwritten(
    tmp_path: Path, content: str
) -> None:
    jobs = JobsFile(tmp_path)
    jobs.path.parent.mkdir(parents=True)
    jobs.path.write_text(content)
    with pytest.raises(StorageError, match=r"jobs\.json"):
        await jobs.load()
    with pytest.raises(StorageError, match=r"jobs\.json"):
        await jobs.modify(lambda _: [job("a")])
    assert jobs.path.read_text() == content


async def test_undecodable_bytes_are_a_storage_error(tmp_path: Path) -> None:
    jobs = JobsFile(tmp_path)
    jobs.path.parent.mkdir(parents=True)
    jobs.path.write_bytes(b"\xff\xfe{")
    with pytest.raises(StorageError, match=r"jobs\.json"):
        await jobs.load()


async def test_an_empty_file_is_no_jobs(tmp_path: Path) -> None:
    jobs = JobsFile(tmp_path)
    jobs.path.parent.mkdir(parents=True)
    jobs.path.write_text("  \n")
    assert await jobs.load() == []


def test_concurrent_edits_are_not_lost(tmp_path: Path) -> None:
    """The daemon and `squidd cron` edit the same file: each read-modify-write holds the
    lock, so every one of many concurrent additions is kept."""
    stores = [JobsFile(tmp_path) for _ in range(4)]

    def add(store: JobsFile, index: int) -> None:
        for n in range(10):
            new = job(f"j{index}-{n}")
            store.modify_sync(lambda current: [*current, new])  # noqa: B023 - called at once

    threads = [threading.Thread(target=add, args=(s, i)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    names = {j.name for j in JobsFile(tmp_path).load_sync()}
    assert names == {f"j{i}-{n}" for i in range(4) for n in range(10)}


async def test_a_change_that_raises_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    jobs = JobsFile(tmp_path)
    await jobs.modify(lambda _: [job("a")])
    before = jobs.path.read_bytes()

    def fail(current: list[CronJob]) -> list[CronJob]:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        await jobs.modify(fail)
    assert jobs.path.read_bytes() == before
    assert await jobs.load() == [job("a")]
