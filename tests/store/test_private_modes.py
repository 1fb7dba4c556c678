"""Private by default: every directory the stores create is 0700 and every file 0600, even
under a umask that would let everyone read (000) — in this process, where no command set the
umask, so the file primitives alone must get it right."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from squidd.channels.email.state import StateFile, state_path
from squidd.core.cron import CronJob
from squidd.core.models import Message, SessionId
from squidd.core.poison import Parked
from squidd.fs import append_lines_locked, atomic_write_text, make_private_dir, private_umask
from squidd.store.attempts import AttemptsDir
from squidd.store.cron_jobs import JobsFile
from squidd.store.handled import HandledFile
from squidd.store.jsonl import JsonlStore
from squidd.store.media import MediaStore
from squidd.store.parked import ParkedDir
from squidd.store.tool_results import ToolResultFiles
from squidd.store.usage import UsageLedger
from tests.support.modes import loose_modes
from tests.support.modes import open_umask as open_umask

pytestmark = pytest.mark.anyio


def test_a_private_dir_and_each_missing_parent_are_0700(tmp_path: Path, open_umask: None) -> None:
    made = tmp_path / "a" / "b" / "c"
    make_private_dir(made)
    assert loose_modes(tmp_path / "a") == []
    make_private_dir(made)  # there already: fine
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        make_private_dir(tmp_path / "file")


def test_an_existing_directory_keeps_the_mode_its_owner_chose(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o750)
    mine.chmod(0o750)
    make_private_dir(mine / "sub")
    assert stat.S_IMODE(mine.stat().st_mode) == 0o750
    assert stat.S_IMODE((mine / "sub").stat().st_mode) == 0o700


def test_the_writers_create_private_files(tmp_path: Path, open_umask: None) -> None:
    atomic_write_text(tmp_path / "d1" / "deep" / "a.txt", "x")
    append_lines_locked(tmp_path / "d2" / "deep" / "b.jsonl", ["{}"])
    assert loose_modes(tmp_path / "d1") == []
    assert loose_modes(tmp_path / "d2") == []


def test_private_umask_is_put_back(open_umask: None) -> None:
    with private_umask():
        assert os.umask(0o077) == 0o077
    assert os.umask(0) == 0


async def _fill(data: Path) -> None:
    """One write through every store of the data dir."""
    store = JsonlStore(data)
    session = SessionId("matrix:!room:example.org")
    await store.append_messages(session, [Message(role="user", content="hello")])
    await store.save_consolidated_cursor(session, 1)
    await store.save_session_summary(session, "summary")
    await store.save_global_memory("memory")
    await store.search_all_sessions("hello", limit=5)  # builds the history index
    await HandledFile(data).add("email", "<a@b>")
    job = CronJob("n", "p", "every", "1h", "UTC", "", datetime.now(UTC))
    JobsFile(data).modify_sync(lambda jobs: [*jobs, job])
    await UsageLedger(data).record(
        session="s", model="m", purpose="turn", prompt=1, completion=1, cached=0
    )
    await AttemptsDir(data).set("email:<a@b>", 1, "started")
    await ParkedDir(data).park(Parked("0" * 32, "message", "email", "<c@d>", "s", "why", "Boom", 3))
    media = MediaStore(data, lifetime_s=3600)

    async def chunks() -> AsyncIterator[bytes]:
        yield b"content"

    await media.save(
        "s", kind="file", name="a.txt", mime="text/plain", chunks=chunks(), max_bytes=99
    )
    await ToolResultFiles(data).save("s", "call-1", "long result")
    state = StateFile(state_path(data, "bot@example.org", "INBOX"))
    state.state.last_uid = 3
    await state.save()


async def test_every_store_writes_owner_only_files(tmp_path: Path, open_umask: None) -> None:
    data = tmp_path / "data"
    await _fill(data)
    names = {p.name for p in data.iterdir()}
    assert {"sessions", "memory", "workspace", "index", "gateway", "cron", "usage"} <= names
    assert {"parked", "media", "tool-results", "email"} <= names
    assert loose_modes(data) == []
