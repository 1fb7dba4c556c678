"""Scheduled backups: the daemon's `backup` child writes one when it is due, keeps the newest
`keep`, and counts the next one from the newest there is (a restart adds none)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import anyio
import pytest

from squidd.config import Settings
from squidd.core.supervisor import ChildHealth
from squidd.gateway.backups import ScheduledBackups, prepare_data_dir
from squidd.store.backup import verify_backup
from tests.support.config import config_sections

pytestmark = pytest.mark.anyio


def settings_for(tmp: Path, **backup: object) -> Settings:
    return Settings(
        **config_sections(
            "http://127.0.0.1:9/v1",
            tmp / "data",
            api_key="sk-test-scheduled-backups",
            backup={"every": "1d", "keep": 2, **backup},
        )
    )


def old_backups(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True)
    made = []
    for number in range(count):
        path = folder / f"squidd-backup-2020010{number + 1}T000000Z.tar.gz"
        path.write_bytes(b"old")
        stamp = time.time() - 10 * 86400 + number
        os.utime(path, (stamp, stamp))
        made.append(path)
    return made


async def test_a_due_backup_is_written_and_only_the_newest_kept(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    (tmp_path / "data" / "sessions").mkdir(parents=True)
    (tmp_path / "data" / "sessions" / "s.jsonl").write_text("{}\n")
    folder = tmp_path / "data" / "backups"
    old = old_backups(folder, 3)
    leftover = folder / ".squidd-backup-20200101T000000Z.tar.gz.abc.partial"
    leftover.write_bytes(b"half")
    os.utime(leftover, (time.time() - 2 * 86400, time.time() - 2 * 86400))
    every_s = settings.backup.every_s
    assert every_s == 86400
    backups = ScheduledBackups(settings, every_s)
    async with anyio.create_task_group() as tg:
        await tg.start(backups.run, ChildHealth("backup"))
        with anyio.fail_after(30):  # a bound for a broken run
            while old[1].exists() or leftover.exists():  # noqa: ASYNC110 - a file on disk has no event
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    assert not leftover.exists()
    kept = sorted(folder.iterdir())
    assert kept[0] == old[2] and len(kept) == 2
    assert "data/sessions/s.jsonl" in {e.name for e in verify_backup(kept[1]).files}
    # The next one is a day after the newest: a restart now would not write another.
    assert ScheduledBackups(settings, every_s)._due_in_s() > 86400 - 60


def test_every_is_checked() -> None:
    with pytest.raises(ValueError, match="30m"):
        settings_for(Path("/tmp"), every="daily")
    assert settings_for(Path("/tmp"), every="").backup.every_s is None


def test_a_data_dir_a_daemon_serves_is_not_migrated_under_it(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    data = tmp_path / "data"
    (data / "sessions").mkdir(parents=True)
    (data / "sessions" / "s.jsonl").write_text("{}\n")  # format 1: state, no marker
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(str(data / "squidd.sock"))
        live.listen()
        assert prepare_data_dir(settings) == []
        assert sorted(p.name for p in data.iterdir()) == ["sessions", "squidd.sock"]
    (data / "squidd.sock").unlink()
    assert prepare_data_dir(settings) == [2]
