"""The record of handled message ids: what a restart reads back."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from squidd.store.handled import HandledFile

pytestmark = pytest.mark.anyio


async def test_a_timestamp_without_zone_does_not_stop_the_daemon(tmp_path: Path) -> None:
    """A line edited by hand (or by an older tool) with a naive time reads as UTC; before,
    comparing it with the aware cut-off raised and the daemon could not start at all."""
    path = tmp_path / "gateway" / "handled.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"channel":"c","id":"naive","at":"2999-01-01T00:00:00"}\n'
        '{"channel":"c","id":"garbled",\n'
        '{"channel":"c","id":"aware","at":"2999-01-01T00:00:00+00:00"}\n'
    )
    handled = HandledFile(tmp_path)
    with capture_logs() as logs:
        assert await handled.load() == 2
    assert await handled.contains("c", "naive")
    assert await handled.contains("c", "aware")
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["handled_line_skipped"]


async def test_the_record_forgets_old_entries_while_running(tmp_path: Path) -> None:
    """Neither the file nor the memory grows with uptime: about once a day, entries past
    the retention period are dropped, and a restart reads back exactly what is kept."""
    from datetime import UTC, datetime, timedelta

    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    handled = HandledFile(tmp_path, retention=timedelta(days=2), clock=lambda: now[0])
    await handled.load()
    for day in range(6):
        now[0] = datetime(2026, 1, 1 + day, 12, tzinfo=UTC)
        await handled.add("c", f"day{day}")
    # On day 5 only days 3, 4 and 5 are within two days.
    assert not await handled.contains("c", "day0")
    assert await handled.contains("c", "day5")
    lines = handled.path.read_text().splitlines()
    assert len(lines) == 3
    again = HandledFile(tmp_path, retention=timedelta(days=2), clock=lambda: now[0])
    assert await again.load() == 3


async def test_a_refused_reply_is_remembered_as_failed_across_restarts_and_compaction(
    tmp_path: Path,
) -> None:
    """A redelivery of a mail whose reply was refused must be told "failed" again, not be
    acknowledged as answered: the failure survives a restart and a compaction."""
    from datetime import UTC, datetime, timedelta

    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    handled = HandledFile(tmp_path, retention=timedelta(days=2), clock=lambda: now[0])
    await handled.load()
    await handled.add("email", "<refused@x>", failed=True)
    await handled.add("email", "<answered@x>")
    assert await handled.failed("email", "<refused@x>")
    assert not await handled.failed("email", "<answered@x>")
    now[0] += timedelta(days=1, hours=1)
    await handled.add("email", "<later@x>")  # compacts (nothing expired yet)
    again = HandledFile(tmp_path, retention=timedelta(days=2), clock=lambda: now[0])
    assert await again.load() == 3
    assert await again.contains("email", "<refused@x>")
    assert await again.failed("email", "<refused@x>")
    assert not await again.failed("email", "<answered@x>")


async def test_the_record_is_bounded_by_count_within_the_retention(tmp_path: Path) -> None:
    """A busy month must not keep every id of the month in memory: past `max_entries` (plus
    a tenth) only the newest are kept in memory, and the file is cut to them at the daily
    compaction and at a restart; the newest ids, the ones a crash can make a source
    redeliver, are always still known."""
    from datetime import UTC, datetime, timedelta

    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    handled = HandledFile(tmp_path, max_entries=50, clock=lambda: now[0])
    await handled.load()
    for n in range(1_000):
        await handled.add("c", f"m{n}")
        assert await handled.load() <= 55
        assert await handled.contains("c", f"m{n}")
    assert await handled.contains("c", "m950")
    assert not await handled.contains("c", "m0")
    again = HandledFile(tmp_path, max_entries=50, clock=lambda: now[0])
    assert await again.load() == 50
    assert await again.contains("c", "m999")
    assert await again.contains("c", "m950")
    assert len(handled.path.read_text().splitlines()) == 50
    for n in range(1_000, 1_040):
        await again.add("c", f"m{n}")
    now[0] += timedelta(days=1, seconds=1)
    await again.add("c", "m1040")
    assert len(handled.path.read_text().splitlines()) == 50
    assert await again.contains("c", "m991")


async def test_a_restart_keeps_only_the_newest_entries_of_a_long_file(tmp_path: Path) -> None:
    path = tmp_path / "gateway" / "handled.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(
        "".join(
            f'{{"channel":"c","id":"m{n}","at":"2999-01-01T00:00:00+00:00"}}\n' for n in range(200)
        )
    )
    handled = HandledFile(tmp_path, max_entries=20)
    assert await handled.load() == 20
    assert await handled.contains("c", "m199")
    assert await handled.contains("c", "m180")
    assert not await handled.contains("c", "m179")
    assert len(path.read_text().splitlines()) == 20


async def test_a_handled_message_leaves_no_outbox_entry_or_attempt_count(tmp_path: Path) -> None:
    """Recording a message as handled drops its outbox entry and its attempt count in the
    same worker-thread call, after its line: a restart finds it handled, with no reply
    left to send again and no attempts counted, and the settlement's own removals that
    follow find nothing left to do. Another message's entries stay."""
    from squidd.core.models import PendingReply, SessionId
    from squidd.core.poison import message_key
    from squidd.store.attempts import AttemptsDir
    from squidd.store.outbox import OutboxDir

    outbox, attempts = OutboxDir(tmp_path), AttemptsDir(tmp_path)
    handled = HandledFile(tmp_path, leftovers=(outbox, attempts))
    reply = PendingReply("c", "room", "the answer", SessionId("s"))
    for source in ("done", "other"):
        assert await outbox.get("c", source) is None
        await outbox.put("c", source, reply)
        await attempts.set(message_key("c", source), 1, "")

    await handled.add("c", "done")

    assert await outbox.get("c", "done") is None
    assert await attempts.get(message_key("c", "done")) == (0, "")
    assert await outbox.get("c", "other") == reply
    after_restart = (OutboxDir(tmp_path), AttemptsDir(tmp_path), HandledFile(tmp_path))
    assert await after_restart[0].sources() == [("c", "other")]
    assert await after_restart[1].count() == 1
    assert await after_restart[2].contains("c", "done")


async def test_a_leftover_that_cannot_be_dropped_fails_the_record_for_a_retry(
    tmp_path: Path,
) -> None:
    """A full or broken disk when the outbox entry is dropped raises `StorageError` from
    the record (the settlement retries it); the entry is still known to be there, so the
    retry drops it."""
    from squidd.core.models import PendingReply, SessionId
    from squidd.errors import StorageError
    from squidd.store.outbox import OutboxDir

    outbox = OutboxDir(tmp_path)
    handled = HandledFile(tmp_path, leftovers=(outbox,))
    assert await outbox.get("c", "m") is None
    await outbox.put("c", "m", PendingReply("c", "room", "text", SessionId("s")))
    entry = next((tmp_path / "gateway" / "outbox").glob("*.json"))
    entry.unlink()
    entry.mkdir()  # unlink now fails (a directory), as a broken disk would
    with pytest.raises(StorageError):
        await handled.add("c", "m")
    entry.rmdir()
    entry.write_text("{}")
    await handled.add("c", "m")
    assert not entry.exists()
    assert await handled.contains("c", "m")
