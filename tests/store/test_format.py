"""Data-dir format versions: a new data dir is marked current, a format-1 data dir (the
layout from before the marker, made here by a fixture) is backed up and migrated, a newer
one is refused with one line."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from squidd.store.backup import verify_backup
from squidd.store.format import (
    CURRENT,
    MARKER,
    MIGRATIONS,
    DataDirTooNewError,
    open_data_dir,
    read_format,
)


def format_1_data_dir(root: Path) -> Path:
    """A data dir as squidd wrote it before formats existed: no marker, modes of a 022
    umask (directories 0755, files 0644)."""
    data = root / "data"
    files = {
        "sessions/email-a.jsonl": '{"role":"user","content":"hi"}\n',
        "workspace/MEMORY.md": "likes tea\n",
        "gateway/handled.jsonl": '{"channel":"email","id":"<a@b>","at":"2026-01-01"}\n',
        "cron/jobs.json": '{"format": 1, "jobs": []}\n',
        "email/bot-123.json": '{"uidvalidity": 1, "last_uid": 7}',
        "matrix/credentials.json": '{"access_token": "t"}',
    }
    for name, text in files.items():
        path = data / name
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        path.parent.chmod(0o755)
        path.write_text(text)
        path.chmod(0o644)
    data.chmod(0o755)
    return data


def contents(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in root.rglob("*")
        if p.is_file() and p.parts[len(root.parts)] not in ("backups", MARKER)
    }


def test_a_new_data_dir_is_marked_current(tmp_path: Path) -> None:
    data = tmp_path / "new"
    assert read_format(data) is None
    assert open_data_dir(data, data / "workspace", squidd="0.1.0") == []
    assert json.loads((data / MARKER).read_text()) == {"format": CURRENT, "squidd": "0.1.0"}
    assert not (data / "backups").exists()
    assert open_data_dir(data, data / "workspace", squidd="0.1.0") == []


def test_a_data_dir_with_only_a_workspace_is_new(tmp_path: Path) -> None:
    (tmp_path / "d" / "workspace").mkdir(parents=True)
    assert read_format(tmp_path / "d") is None


def test_a_format_1_data_dir_is_backed_up_then_migrated(tmp_path: Path) -> None:
    data = format_1_data_dir(tmp_path)
    before = contents(data)
    assert read_format(data) == 1
    assert open_data_dir(data, data / "workspace", squidd="0.1.0") == [2]
    assert read_format(data) == CURRENT == 2
    assert contents(data) == before
    for path in [data, *data.rglob("*")]:
        want = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == want, path
    [backup] = (data / "backups").iterdir()
    manifest = verify_backup(backup)
    assert manifest.data_format == 1
    assert manifest.secrets  # the copy to go back to is whole
    assert "data/matrix/credentials.json" in {e.name for e in manifest.files}
    assert open_data_dir(data, data / "workspace", squidd="0.1.0") == []  # once only


def test_every_migration_step_can_run_twice(tmp_path: Path) -> None:
    """A crash after a step but before its marker runs the step again on the next start."""
    data = format_1_data_dir(tmp_path)
    for migration in MIGRATIONS:
        migration.step(data)
        migration.step(data)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700


def test_a_newer_data_dir_is_refused_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / MARKER).write_text(json.dumps({"format": CURRENT + 1, "squidd": "9.9.9"}))
    with pytest.raises(DataDirTooNewError) as info:
        open_data_dir(data, data / "workspace", squidd="0.1.0")
    message = str(info.value)
    assert "\n" not in message
    assert f"format {CURRENT + 1}" in message and "9.9.9" in message
    assert sorted(p.name for p in data.iterdir()) == [MARKER]  # nothing touched
