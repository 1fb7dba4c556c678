"""R5: damaged storage. A torn JSONL tail, a truncated meta.json and a summary.md that is not
UTF-8 (each in its own session, left as a crash or a bad editor would leave them), then a
full disk during a write (the data dir on a small tmpfs): the daemon keeps answering, says
in its log what it found, and every complete history line survives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from squidd.store.jsonl import JsonlStore
from tests.faults.harness import Counts, SpoolDaemon, new_id, wait_until
from tests.support.fake_llm import FakeLLM


def complete_lines(path: Path) -> list[bytes]:
    """The lines of `path` that end in a newline and parse as JSON."""
    out = []
    for raw in path.read_bytes().splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            continue
        try:
            json.loads(raw)
        except ValueError:
            continue
        out.append(raw.rstrip(b"\n"))
    return out


def converse(daemon: SpoolDaemon, session: str, n: int, sent: list[str]) -> None:
    for _ in range(n):
        message_id = new_id()
        sent.append(message_id)
        daemon.send(message_id, f"hello {message_id}", session)
    wait_until(lambda: all(daemon.answers()[m] for m in sent), f"answers in {session}")


SESSIONS = ("r5-torn", "r5-meta", "r5-summary")


@pytest.mark.slow
def test_damaged_files_are_reported_and_the_daemon_keeps_answering(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    daemon = SpoolDaemon(tmp_path, fake_llm.base_url, api_key="sk-test-faults-r5-0001")
    store = JsonlStore(daemon.data)
    sent: list[str] = []
    try:
        daemon.start()
        for session in SESSIONS:
            converse(daemon, session, 2, sent)
        assert daemon.current.proc.poll() is None
        # Every message settled first (acknowledged): the damage below is the kill point, not
        # the window between a reply's send and its record, in which this spool channel (its
        # sends are not idempotent) would show a reply twice.
        wait_until(lambda: daemon.pending() == 0, "every message acknowledged")
        daemon.current.kill()  # damage is what a crash leaves: no clean shutdown either
        before = {s: complete_lines(store.history_path(s)) for s in SESSIONS}

        with store.history_path("r5-torn").open("ab") as handle:
            handle.write(b'{"role": "user", "content": "half a li')
        meta = store.meta_path("r5-meta")
        meta.write_text('{"session_id": "r5-meta", "last_consoli', encoding="utf-8")
        summary = store.summary_path("r5-summary")
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_bytes(b"The user likes \xff\xfe caf\xe9 and \x80 tea.\n")
        store.global_memory_path.parent.mkdir(parents=True, exist_ok=True)
        store.global_memory_path.write_bytes(b"# Memory\n- caf\xe9 \xc3(\n")

        daemon.start()
        for session in SESSIONS:
            converse(daemon, session, 2, sent)
        answers = daemon.answers()
        replies = {r["file"].split(".")[0]: r["text"] for r in daemon.replies()}
        counts = Counts("R5 damaged files")
        counts.tally(sent, answers)
        counts.crashes = sum(1 for e in daemon.log_events() if e.get("event") == "turn_crashed")
        counts.report()
        assert counts.lost == 0 and counts.duplicates == 0 and counts.crashes == 0
        for message_id in sent:
            assert replies[message_id] == f"echo: hello {message_id}", replies[message_id]
        for session in SESSIONS:
            after = complete_lines(store.history_path(session))
            assert after[: len(before[session])] == before[session], session
            assert len(after) == len(before[session]) + 4, session
        events = {e.get("event") for e in daemon.current.events()}
        assert "history_line_skipped" in events
        assert "meta_file_corrupt" in events
        assert "memory_file_not_utf8" in events
        assert daemon.current.proc.poll() is None
    finally:
        daemon.close()


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, mounted for this test and unmounted after it (needs root)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mount_point)],
        check=True,
    )
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def fill(path: Path) -> None:
    """Write zeros to `path` until its disk is full."""
    with path.open("wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 1024)
        except OSError:
            return


@pytest.mark.slow
def test_a_full_disk_during_a_write_loses_no_complete_line(
    tmp_path: Path, small_tmpfs: Path, fake_llm: FakeLLM
) -> None:
    # The whole data dir is on the small disk; only the test's spool (its mailbox) is not,
    # so messages still arrive while the disk is full.
    data = small_tmpfs / "data"
    (tmp_path / "spool").mkdir()
    data.mkdir()
    (data / "spool").symlink_to(tmp_path / "spool")
    daemon = SpoolDaemon(
        tmp_path, fake_llm.base_url, api_key="sk-test-faults-r5-0002", storage={"data_dir": data}
    )
    daemon.data, daemon.spool = data, tmp_path / "spool"
    store = JsonlStore(data)
    session = "r5-full"
    sent: list[str] = []
    try:
        run = daemon.start()
        converse(daemon, session, 3, sent)
        before = complete_lines(store.history_path(session))
        filler = small_tmpfs / "filler"
        fill(filler)
        full = []
        for _ in range(3):
            message_id = new_id()
            full.append(message_id)
            sent.append(message_id)
            daemon.send(message_id, f"hello {message_id} " + "x" * 3000, session)
        wait_until(
            lambda: (
                any(
                    e.get("level") in ("error", "warning")
                    and e.get("event") != "history_line_skipped"
                    for e in run.events()[-50:]
                )
                and run.proc.poll() is None
            ),
            "the full disk reported",
        )
        filler.unlink()
        converse(daemon, session, 3, sent)
        counts = Counts("R5 full disk")
        counts.tally(sent, daemon.answers())
        counts.crashes = sum(1 for e in daemon.log_events() if e.get("event") == "turn_crashed")
        counts.crashes += 0 if run.proc.poll() is None else 1
        counts.report()
        assert run.proc.poll() is None, run.log_text()[-3000:]
        assert counts.lost == 0 and counts.duplicates == 0 and counts.crashes == 0
        after = complete_lines(store.history_path(session))
        assert after[: len(before)] == before
        texts = [json.loads(line).get("content") for line in after]
        for message_id in sent[-3:]:
            assert f"hello {message_id}" in texts
        replies = {r["file"].split(".")[0]: r["text"] for r in daemon.replies()}
        for message_id in sent[-3:]:
            assert replies[message_id] == f"echo: hello {message_id}"
        print("during the full disk:", [replies[m][:60] for m in full])
    finally:
        daemon.close()
