"""Backup archives: what goes in (and what stays out), verify against the manifest, restore
only into an empty folder, and an append held up by its lock is never copied half."""

from __future__ import annotations

import fcntl
import io
import os
import tarfile
import threading
from pathlib import Path

import pytest

from squidd.fs import append_lines_locked
from squidd.store.backup import (
    BackupError,
    Source,
    create_backup,
    restore_backup,
    verify_backup,
)


def make_data_dir(root: Path) -> Path:
    data = root / "data"
    files = {
        "sessions/email-a.jsonl": '{"role":"user","content":"hi"}\n',
        "sessions/email-a.meta.json": '{"last_consolidated": 0}',
        "workspace/MEMORY.md": "# Memory\nlikes tea\n",
        "gateway/handled.jsonl": '{"channel":"email","id":"<a@b>","at":"2026-01-01"}\n',
        "cron/jobs.json": '{"format": 1, "jobs": []}\n',
        "audit/calls.jsonl": '{"n":1}\n',
        "audit/head.json": '{"lines": 1}',
        "index/history.sqlite": "a cache",
        "index/recall/history.f32": "derived vectors",
        "agents/planner/sessions/s.jsonl": '{"role":"user","content":"plan"}\n',
        "agents/planner/index/recall/state.json": "{}",
        "agents/planner/index/history.sqlite": "a cache",
        "backups/old.tar.gz": "an older backup",
        "matrix/sync.json": '{"next_batch": "s1"}',
        "matrix/credentials.json": '{"access_token": "secret"}',
        "matrix/identity.json": '{"master": "secret"}',
        "matrix/store/bot.db": "crypto",
        "sessions/.x.jsonl.123.tmp": "half written",
    }
    for name, text in files.items():
        path = data / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return data


SECRET_FILES = ("matrix/credentials.json", "matrix/identity.json", "matrix/store")


def source(data: Path, workspace: Path | None = None) -> Source:
    return Source(data, workspace or data / "workspace", 2, "0.1.0", SECRET_FILES)


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


KEPT = {
    "sessions/email-a.jsonl",
    "agents/planner/sessions/s.jsonl",
    "sessions/email-a.meta.json",
    "workspace/MEMORY.md",
    "gateway/handled.jsonl",
    "cron/jobs.json",
    "audit/calls.jsonl",
    "audit/head.json",
    "matrix/sync.json",
}
SECRET = {"matrix/credentials.json", "matrix/identity.json", "matrix/store/bot.db"}


def test_a_backup_restores_the_same_files_secrets_left_out(tmp_path: Path) -> None:
    data = make_data_dir(tmp_path)
    archive = tmp_path / "b.tar.gz"
    manifest = create_backup(source(data), archive)
    assert {e.name.removeprefix("data/") for e in manifest.files} == KEPT
    assert not manifest.secrets
    assert verify_backup(archive).files == manifest.files
    restored = tmp_path / "restored"
    restore_backup(archive, restored, max_format=2)
    original = tree(data)
    assert tree(restored) == {name: original[name] for name in KEPT}
    assert oct(restored.stat().st_mode & 0o777) == "0o700"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_secrets_go_in_when_asked_for(tmp_path: Path) -> None:
    data = make_data_dir(tmp_path)
    archive = tmp_path / "b.tar.gz"
    manifest = create_backup(source(data), archive, secrets=True)
    assert {e.name.removeprefix("data/") for e in manifest.files} == KEPT | SECRET
    assert verify_backup(archive).secrets


def test_a_workspace_outside_the_data_dir_is_restored_as_its_workspace(tmp_path: Path) -> None:
    data = make_data_dir(tmp_path)
    (data / "workspace" / "MEMORY.md").unlink()
    (data / "workspace").rmdir()
    outside = tmp_path / "ws"
    (outside / "notes").mkdir(parents=True)
    (outside / "MEMORY.md").write_text("outside memory")
    (outside / "notes" / "a.txt").write_text("a")
    archive = tmp_path / "b.tar.gz"
    create_backup(source(data, outside), archive)
    restore_backup(archive, tmp_path / "r", max_format=2)
    assert (tmp_path / "r" / "workspace" / "MEMORY.md").read_text() == "outside memory"
    assert (tmp_path / "r" / "workspace" / "notes" / "a.txt").read_text() == "a"


def rewrite(archive: Path, target: Path, change: str, content: bytes) -> None:
    """A copy of `archive` with one member's content replaced, the manifest kept."""
    with tarfile.open(archive, "r:gz") as old, tarfile.open(target, "w:gz") as new:
        for member in old:
            data = old.extractfile(member)
            assert data is not None
            body = content if member.name == change else data.read()
            member.size = len(body)
            new.addfile(member, io.BytesIO(body))


def test_a_corrupted_archive_fails_verify_naming_the_file(tmp_path: Path) -> None:
    data = make_data_dir(tmp_path)
    archive = tmp_path / "b.tar.gz"
    create_backup(source(data), archive)
    bad = tmp_path / "bad.tar.gz"
    rewrite(archive, bad, "data/gateway/handled.jsonl", b"something else\n")
    with pytest.raises(BackupError, match=r"data/gateway/handled\.jsonl does not match"):
        verify_backup(bad)
    with pytest.raises(BackupError, match=r"handled\.jsonl"):
        restore_backup(bad, tmp_path / "r", max_format=2)
    assert not (tmp_path / "r").exists()

    raw = archive.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(BackupError, match=r"cut\.tar\.gz: damaged at"):
        verify_backup(cut)
    flipped = bytearray(raw)
    flipped[len(raw) // 2] ^= 0xFF
    (tmp_path / "flip.tar.gz").write_bytes(bytes(flipped))
    with pytest.raises(BackupError, match=r"flip\.tar\.gz"):
        verify_backup(tmp_path / "flip.tar.gz")


def test_restore_never_writes_into_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    data = make_data_dir(tmp_path)
    archive = tmp_path / "b.tar.gz"
    create_backup(source(data), archive)
    before = tree(data)
    with pytest.raises(BackupError, match="not empty"):
        restore_backup(archive, data, max_format=2)
    assert tree(data) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    restore_backup(archive, empty, max_format=2)
    assert (empty / "workspace" / "MEMORY.md").exists()


def test_a_backup_of_a_newer_format_is_not_restored(tmp_path: Path) -> None:
    data = make_data_dir(tmp_path)
    archive = tmp_path / "b.tar.gz"
    create_backup(Source(data, data / "workspace", 3, "9.0", ()), archive)
    with pytest.raises(BackupError, match="format 3"):
        restore_backup(archive, tmp_path / "r", max_format=2)


def test_an_append_in_progress_is_waited_for_never_copied_half(tmp_path: Path) -> None:
    """An appender holds the file's lock mid-write: the backup waits for the whole line."""
    data = make_data_dir(tmp_path)
    history = data / "sessions" / "email-a.jsonl"
    fd = os.open(history, os.O_WRONLY | os.O_APPEND)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b'{"role":"assistant","con')  # half a line, under the lock
    archive = tmp_path / "b.tar.gz"
    done = threading.Event()

    def run() -> None:
        create_backup(source(data), archive)
        done.set()

    worker = threading.Thread(target=run)
    worker.start()
    assert not done.wait(1.0)  # still waiting for the lock (not a speed bound)
    os.write(fd, b'tent":"hello"}\n')
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    worker.join(30)
    assert done.is_set()
    append_lines_locked(history, ['{"role":"user","content":"after"}'])
    restore_backup(archive, tmp_path / "r", max_format=2)
    lines = (tmp_path / "r" / "sessions" / "email-a.jsonl").read_text().splitlines()
    assert lines[-1] == '{"role":"assistant","content":"hello"}'
