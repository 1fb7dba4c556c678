"""The FTS5 history index: built from the JSONL, caught up after appends, rebuilt when the
file was replaced or the index is missing or damaged, and searched across sessions."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from squidd.core.models import HistoryHit, Message, SessionId
from squidd.store.jsonl import JsonlStore
from squidd.store.records import MESSAGE

A = SessionId("!roomA:example.org")
B = SessionId("email:me@example.org")

pytestmark = pytest.mark.anyio


def user(text: str, ts: str | None = None) -> Message:
    return Message(role="user", content=text, ts=ts)


async def test_search_uses_the_index_and_sees_later_appends(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.append_messages(A, [user("the blue kayak"), user("a red canoe")])
    assert [h.index for h in await store.search_history(A, "kayak", limit=5)] == [0]
    assert store.history_index.path.exists()
    await store.append_messages(A, [user("another kayak trip")])
    hits = await store.search_history(A, "kayak", limit=5)
    assert [h.index for h in hits] == [2, 0]


async def test_short_words_still_match_like_the_scan(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.append_messages(A, [user("go to bed"), user("go home")])
    assert [h.index for h in await store.search_history(A, "go", limit=5)] == [1, 0]
    assert [h.index for h in await store.search_history(A, "go bed", limit=5)] == [0]


async def test_a_replaced_history_file_is_indexed_again(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.append_messages(A, [user("old words about llamas"), user("more llamas")])
    assert len(await store.search_history(A, "llamas", limit=5)) == 2
    path = store.history_path(A)
    replacement = path.with_suffix(".new")
    replacement.write_text(MESSAGE.dumps(user("only alpacas now")) + "\n", encoding="utf-8")
    replacement.replace(path)  # another inode: the old rows must go
    assert await store.search_history(A, "llamas", limit=5) == []
    assert [h.snippet for h in await store.search_history(A, "alpacas", limit=5)] == [
        "only alpacas now"
    ]


async def test_a_missing_or_damaged_index_is_rebuilt_from_the_jsonl(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.append_messages(A, [user("penguins on ice")])
    assert len(await store.search_history(A, "penguin", limit=5)) == 1
    index = store.history_index.path
    index.unlink()
    assert len(await store.search_history(A, "penguin", limit=5)) == 1
    for suffix in ("-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    index.write_bytes(b"this is not a database" * 100)
    with capture_logs() as logs:
        assert len(await store.search_history(A, "penguin", limit=5)) == 1
    assert any(e["event"] == "history_index_rebuilt" for e in logs)


async def test_a_line_still_being_written_is_left_for_the_next_search(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.append_messages(A, [user("first zebra")])
    path = store.history_path(A)
    with path.open("ab") as handle:
        handle.write(MESSAGE.dumps(user("second zebra")).encode()[:10])
    assert [h.index for h in await store.search_history(A, "zebra", limit=5)] == [0]


async def test_search_across_sessions_names_sessions_and_dates(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.append_messages(A, [user("budget for the boat", ts="2026-01-02T10:00:00+00:00")])
    await store.save_consolidated_cursor(A, 0)  # writes the meta file with the session id
    await store.append_messages(B, [user("boat insurance", ts="2026-03-04T09:00:00+00:00")])
    await store.save_consolidated_cursor(B, 0)
    hits = await store.search_all_sessions("boat", limit=10)
    assert [(h.session, h.ts) for h in hits] == [
        (B, "2026-03-04T09:00:00+00:00"),
        (A, "2026-01-02T10:00:00+00:00"),
    ]
    assert await store.search_history(A, "insurance", limit=5) == []


async def test_search_all_history_tool_names_session_and_date(tmp_path: Path) -> None:
    from squidd.tools.search_history import SearchAllHistoryTool

    store = JsonlStore(tmp_path)
    await store.append_messages(A, [user("the boat budget", ts="2026-01-02T10:00:00+00:00")])
    await store.save_consolidated_cursor(A, 0)

    async def search(query: str, limit: int) -> list[HistoryHit]:
        return await store.search_all_sessions(query, limit=limit)

    result = await SearchAllHistoryTool(search).execute({"query": "boat"})
    assert result.content == f"[{A} #0 2026-01-02T10:00:00+00:00] user: the boat budget"


async def test_a_small_session_in_a_big_index_finds_only_its_own(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.append_messages(B, [user(f"kayak day {i}") for i in range(30)])
    await store.append_messages(A, [user("my kayak"), user("no match"), user("KAYAK again")])
    assert len(await store.search_history(B, "kayak", limit=50)) == 30
    hits = await store.search_history(A, "kayak", limit=10)  # A: 3 of 33 messages
    assert [(h.index, h.snippet) for h in hits] == [(2, "KAYAK again"), (0, "my kayak")]
