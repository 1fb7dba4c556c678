"""Pending scheduled runs on disk: the layout existing data dirs use, torn files, hostile ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from squidd.core.models import InboundKind
from squidd.core.runs import PendingRun
from squidd.store.pending_runs import PendingRunsDir

pytestmark = pytest.mark.anyio

SOURCE = "nightly@2026-11-23T01:00:00+00:00"
RUN = PendingRun(InboundKind.CRON, SOURCE, "cron:nightly", "check the backups", "", "NOTHING", "")
# The name a pending run for ("cron", SOURCE) has always had on disk.
OLD_NAME = "cron_nightly_2026-11-23t01_00_00_00_00-0ef4ae4445d13ed6bf69.json"


def runs_dir(data: Path) -> Path:
    return data / "gateway" / "runs"


async def test_a_run_written_before_this_version_is_loaded(tmp_path: Path) -> None:
    runs_dir(tmp_path).mkdir(parents=True)
    (runs_dir(tmp_path) / OLD_NAME).write_text(
        '{\n "channel": "cron",\n "source_id": "nightly@2026-11-23T01:00:00+00:00",\n'
        ' "session_id": "cron:nightly",\n "text": "check the backups",\n "target": "",\n'
        ' "quiet_reply": "NOTHING",\n "subject": ""\n}',
        encoding="utf-8",
    )
    runs = PendingRunsDir(tmp_path)
    assert await runs.load() == [RUN]
    await runs.remove("cron", SOURCE)
    assert list(runs_dir(tmp_path).iterdir()) == []


async def test_put_writes_the_layout_older_versions_read(tmp_path: Path) -> None:
    await PendingRunsDir(tmp_path).put(RUN)
    (path,) = runs_dir(tmp_path).iterdir()
    assert path.name == OLD_NAME
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "kind": "cron",
        "channel": "cron",  # what versions before `kind` read
        "source_id": SOURCE,
        "session_id": "cron:nightly",
        "text": "check the backups",
        "target": "",
        "quiet_reply": "NOTHING",
        "subject": "",
        "conversation_channel": "",
        "agent": "",  # older versions ignore a key they do not know
    }


async def test_no_directory_means_no_runs(tmp_path: Path) -> None:
    runs = PendingRunsDir(tmp_path)
    assert await runs.load() == []
    await runs.remove("cron", "never-written")  # not an error


async def test_load_returns_every_run_by_file_name(tmp_path: Path) -> None:
    runs = PendingRunsDir(tmp_path)
    written = [
        PendingRun(InboundKind.CRON, f"job{i}@t", f"cron:job{i}", f"run {i}", "") for i in range(5)
    ]
    for run in written:
        await runs.put(run)
    loaded = await runs.load()
    assert sorted(loaded, key=lambda r: r.source_id) == written
    names = sorted(p.name for p in runs_dir(tmp_path).iterdir())
    assert [runs_dir(tmp_path) / n for n in names] == sorted(runs_dir(tmp_path).iterdir())
    await runs.remove("cron", "job3@t")
    assert len(await runs.load()) == 4


async def test_torn_and_garbage_files_are_skipped_with_a_warning_and_kept(
    tmp_path: Path,
) -> None:
    """One bad file does not stop the daemon from resuming the others, and is never
    overwritten, so a human can look at it."""
    runs = PendingRunsDir(tmp_path)
    await runs.put(RUN)
    directory = runs_dir(tmp_path)
    torn = directory / "torn.json"
    torn.write_text('{"channel": "cron", "sour')
    (directory / "list.json").write_text("[1, 2]")  # JSON, but not an object
    (directory / "binary.json").write_bytes(b"\xff\x00\xfe")
    (directory / "missing-keys.json").write_text('{"channel": "cron"}')
    (directory / ".half.json.abc.tmp").write_text("{")  # an atomic write cut short
    (directory / "notes.txt").write_text("not a run")
    with capture_logs() as logs:
        assert await runs.load() == [RUN]
    warned = sorted(Path(e["path"]).name for e in logs if e["event"] == "pending_run_unreadable")
    assert warned == ["binary.json", "list.json", "missing-keys.json", "torn.json"]
    assert torn.read_text() == '{"channel": "cron", "sour'


@pytest.mark.parametrize("source_id", ["../../../escape", "/abs", "a/b/c", "..", ".", "\n"])
async def test_hostile_source_ids_stay_inside_the_directory(tmp_path: Path, source_id: str) -> None:
    runs = PendingRunsDir(tmp_path)
    run = PendingRun(InboundKind.CRON, source_id, "cron:x", "t", "")
    await runs.put(run)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert [p.parent for p in files] == [runs_dir(tmp_path)]
    assert await runs.load() == [run]
    await runs.remove("cron", source_id)
    assert await runs.load() == []
