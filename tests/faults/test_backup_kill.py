"""SIGKILL in the middle of `squidd backup create`: no half archive passes for a whole one;
in the middle of `squidd backup restore`: no half data dir at the target.

The backup is stopped at a known point without any test hook: an appender holds the lock of
a history file (as the daemon does while it appends), so the backup, which copies each file
under that lock, waits there with part of the archive written; the kernel's lock table
(/proc/locks) shows it waiting. It is killed then. Nothing is at the archive's name, what
the kill left is no backup to `verify`, and the next `backup create` writes a whole one.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.config import write_daemon_config
from tests.support.daemon import daemon_env, run_squidd, squidd_argv

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs /proc/locks")


def waiting_for_a_lock(pid: int) -> bool:
    """The kernel lists a process blocked on a lock as `N: -> FLOCK ... <pid> ...`."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "->" and fields[5] == str(pid):
            return True
    return False


def test_a_backup_killed_midway_leaves_nothing_that_passes_for_one(tmp_path: Path) -> None:
    config = write_daemon_config(tmp_path, "http://127.0.0.1:9/v1", api_key="sk-test-bk-kill")
    data = tmp_path / "data"
    for number in range(30):  # written before the locked one (the archive is in order)
        path = data / "gateway" / "outbox" / f"r{number:02}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(4096).hex().encode())
    history = data / "sessions" / "zz.jsonl"
    history.parent.mkdir(parents=True)
    history.write_text('{"role":"user","content":"hi"}\n')
    archive = tmp_path / "out" / "backup.tar.gz"

    fd = os.open(history, os.O_WRONLY | os.O_APPEND)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        proc = subprocess.Popen(
            squidd_argv(config, "backup", "create", str(archive)),
            env=daemon_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60  # a bound for a broken run, not a speed check
        while not waiting_for_a_lock(proc.pid):
            assert proc.poll() is None, "the backup ended without waiting for the lock"
            assert time.monotonic() < deadline, "the backup never reached the locked file"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    assert not archive.exists()
    leftovers = list(archive.parent.iterdir())
    assert leftovers, "the kill came before anything was written: move the lock later"
    for partial in leftovers:
        assert partial.name.endswith(".partial")
        checked = run_squidd(config, "backup", "verify", str(partial))
        assert checked.returncode == 1, checked.stdout
    assert run_squidd(config, "backup", "verify", str(archive)).returncode == 1

    made = run_squidd(config, "backup", "create", str(archive), "--verify")
    assert made.returncode == 0, made.stderr
    assert "31 files" in made.stdout


def test_a_restore_killed_midway_leaves_the_target_empty(tmp_path: Path) -> None:
    """Killed while it writes the files (each fsync'd, so it takes a while): the target is
    still missing, never half a data dir a daemon could start from; a second restore works."""
    config = write_daemon_config(tmp_path, "http://127.0.0.1:9/v1", api_key="sk-test-bk-kill")
    data = tmp_path / "data"
    for number in range(600):
        path = data / "sessions" / f"s{number:03}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"role":"user","content":"hi"}\n' * 20)
    archive = tmp_path / "backup.tar.gz"
    assert run_squidd(config, "backup", "create", str(archive)).returncode == 0
    target = tmp_path / "restored"
    proc = subprocess.Popen(
        squidd_argv(config, "backup", "restore", str(archive), "--target", str(target)),
        env=daemon_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60  # a bound for a broken run, not a speed check
    while not any(p.is_file() for p in tmp_path.glob(".restored.restoring-*/sessions/*")):
        assert proc.poll() is None, "the restore ended before it was seen writing"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not target.exists()

    again = run_squidd(config, "backup", "restore", str(archive), "--target", str(target))
    assert again.returncode == 0, again.stderr
    assert len(list((target / "sessions").iterdir())) == 600
