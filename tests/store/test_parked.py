"""The dead-letter folder and the attempt counts on disk: what survives a new process, what
an operator's change does, what a second parking keeps."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from squidd.core.models import ChannelName, Inbound, PendingReply, SessionId, SourceId
from squidd.core.poison import Parked, ParkState
from squidd.store.attempts import AttemptsDir
from squidd.store.parked import ParkedDir, UnknownParkedError

pytestmark = pytest.mark.anyio

SENT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def item(n: int, **changes: object) -> Parked:
    base = Parked(
        id=f"{n:012x}",
        loop="message",
        channel="email",
        source_id=f"<m{n}@x>",
        session_id="alice@x",
        reason=f"ValueError: bad {n}",
        error="ValueError",
        attempts=3,
        inbound=Inbound(
            ChannelName("email"),
            SourceId(f"<m{n}@x>"),
            SessionId("alice@x"),
            "alice@x",
            "hi",
            received_at=SENT,
        ),
        reply=PendingReply("email", "alice@x", f"reply {n}", SessionId("alice@x")),
    )
    return base.with_state(base.state, **changes)


async def test_attempt_counts_survive_a_new_process_and_clear_removes_them(
    tmp_path: Path,
) -> None:
    first = AttemptsDir(tmp_path)
    await first.set("email\0<m1@x>", 2, "ValueError: x")
    await first.set("email\0<m2@x>", 1, "")
    await first.clear("email\0<m2@x>")
    again = AttemptsDir(tmp_path)
    assert await again.get("email\0<m1@x>") == (2, "ValueError: x")
    assert await again.get("email\0<m2@x>") == (0, "")
    assert await again.count() == 1
    await again.clear("email\0<m1@x>")
    assert list((tmp_path / "gateway" / "attempts").glob("*.json")) == []


async def test_a_torn_count_file_is_dropped_with_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "gateway" / "attempts"
    folder.mkdir(parents=True)
    (folder / "x.json").write_text('{"key": "a", "cou')
    assert await AttemptsDir(tmp_path).count() == 0


async def test_parked_items_are_listed_oldest_first_and_summarised(tmp_path: Path) -> None:
    folder = ParkedDir(tmp_path)
    assert folder.summary_sync().count == 0
    await folder.park(item(1))
    await folder.park(item(2))
    listed = ParkedDir(tmp_path).list_sync()
    assert [p.id for p in listed] == [item(1).id, item(2).id]
    assert listed[0] == item(1).with_state(ParkState.PARKED, parked_at=listed[0].parked_at)
    summary = await folder.summary()
    assert (summary.count, summary.newest_reason, summary.newest_id) == (
        2,
        "ValueError: bad 2",
        item(2).id,
    )
    assert oct((tmp_path / "parked" / f"{item(1).id}.json").stat().st_mode & 0o777) == "0o600"


async def test_parking_again_keeps_the_retry_count_and_the_reply(tmp_path: Path) -> None:
    folder = ParkedDir(tmp_path)
    await folder.park(item(1))
    await folder.change(item(1).id, lambda p: p.with_state(ParkState.RETRYING, retries=2))
    await folder.park(item(1, reply=None, reason="KeyError: k"))
    again = folder.get_sync(item(1).id)
    assert (again.state, again.retries, again.reason) == (ParkState.PARKED, 2, "KeyError: k")
    assert again.reply == item(1).reply


async def test_change_removes_on_none_and_unknown_ids_are_refused(tmp_path: Path) -> None:
    folder = ParkedDir(tmp_path)
    await folder.park(item(1))
    before = await folder.change(item(1).id, lambda p: None)
    assert before.id == item(1).id and folder.list_sync() == []
    for bad in ("nope", "../x", "", item(1).id):
        with pytest.raises(UnknownParkedError):
            folder.get_sync(bad)


async def test_an_unreadable_item_is_skipped_not_fatal(tmp_path: Path) -> None:
    folder = ParkedDir(tmp_path)
    await folder.park(item(1))
    (tmp_path / "parked" / "abcdefabcdef.json").write_text("{not json")
    assert [p.id for p in folder.list_sync()] == [item(1).id]
