"""The memory store contract (`core.ports.MemoryStore`): the JSONL files and the in-memory
double agree on history windows, cursors, the memory documents and search."""

from __future__ import annotations

import pytest

from squidd.core.models import Message, SessionId, ToolCall
from squidd.core.ports import MemoryStore

pytestmark = pytest.mark.anyio

S = SessionId("matrix:!room:example.org")


def user(text: str, ts: str | None = None) -> Message:
    return Message(role="user", content=text, ts=ts)


def numbered(count: int) -> list[Message]:
    return [user(f"message {i}") for i in range(count)]


async def test_a_new_session_is_empty(memory_store: MemoryStore) -> None:
    window = await memory_store.load_window(S)
    assert (window.cursor, window.messages) == (0, [])
    assert await memory_store.load_consolidated_cursor(S) == 0
    assert await memory_store.load_session_summary(S) == ""
    assert await memory_store.load_global_memory() == ""
    assert await memory_store.search_history(S, "anything", limit=5) == []


async def test_messages_come_back_whole_and_in_order(memory_store: MemoryStore) -> None:
    turn = [
        user("what's the weather? ✓", ts="2026-11-23T01:00:00+00:00"),
        Message(
            role="assistant",
            content=None,
            tool_calls=(ToolCall("call-1", "web_fetch", '{"url": "https://x"}'),),
            turn="t1",
        ),
        Message(role="tool", content="sunny\nwarm", tool_call_id="call-1", name="web_fetch"),
        Message(role="assistant", content="Sunny.", turn="t1"),
    ]
    await memory_store.append_messages(S, turn[:2])
    await memory_store.append_messages(S, turn[2:])
    window = await memory_store.load_window(S)
    assert (window.cursor, window.messages) == (0, turn)


async def test_the_window_starts_at_the_cursor(memory_store: MemoryStore) -> None:
    history = numbered(10)
    await memory_store.append_messages(S, history)
    await memory_store.save_consolidated_cursor(S, 7)
    window = await memory_store.load_window(S)
    assert (window.cursor, window.messages) == (7, history[7:])
    assert await memory_store.load_consolidated_cursor(S) == 7
    more = [user("later")]
    await memory_store.append_messages(S, more)
    assert (await memory_store.load_window(S)).messages == [*history[7:], *more]


async def test_the_cursor_can_move_back_and_past_the_end(memory_store: MemoryStore) -> None:
    history = numbered(6)
    await memory_store.append_messages(S, history)
    await memory_store.save_consolidated_cursor(S, 5)
    await memory_store.save_consolidated_cursor(S, 2)
    assert (await memory_store.load_window(S)).messages == history[2:]
    await memory_store.save_consolidated_cursor(S, 6)
    assert (await memory_store.load_window(S)).messages == []
    await memory_store.save_consolidated_cursor(S, 0)
    assert (await memory_store.load_window(S)).messages == history


async def test_a_negative_cursor_is_refused(memory_store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="cursor"):
        await memory_store.save_consolidated_cursor(S, -1)


@pytest.mark.parametrize("other", ["Matrix:!room:example.org", "../matrix", "matrix_!room"])
async def test_sessions_are_kept_apart(memory_store: MemoryStore, other: str) -> None:
    await memory_store.append_messages(S, [user("mine")])
    await memory_store.save_consolidated_cursor(S, 1)
    await memory_store.save_session_summary(S, "my summary")
    theirs = SessionId(other)
    await memory_store.append_messages(theirs, [user("theirs")])
    window = await memory_store.load_window(theirs)
    assert (window.cursor, window.messages) == (0, [user("theirs")])
    assert await memory_store.load_session_summary(theirs) == ""
    assert await memory_store.search_history(theirs, "mine", limit=5) == []


async def test_memory_documents_are_replaced_whole(memory_store: MemoryStore) -> None:
    await memory_store.save_global_memory("# Memory\n- likes tea\n")
    await memory_store.save_global_memory("# Memory\n- likes coffee\n")
    await memory_store.save_session_summary(S, "first")
    await memory_store.save_session_summary(S, "second")
    assert await memory_store.load_global_memory() == "# Memory\n- likes coffee\n"
    assert await memory_store.load_session_summary(S) == "second"


async def test_search_finds_user_and_assistant_text_newest_first(
    memory_store: MemoryStore,
) -> None:
    await memory_store.append_messages(
        S,
        [
            Message(role="system", content="Tea time"),
            user("I like green TEA", ts="t0"),
            Message(role="tool", content="tea", tool_call_id="c", name="x"),
            Message(role="assistant", content="Green tea it is."),
            user("coffee instead"),
            user("tea again, green"),
        ],
    )
    await memory_store.save_consolidated_cursor(S, 4)  # search covers the whole history
    hits = await memory_store.search_history(S, "green tea", limit=10)
    assert [(h.source, h.index, h.role) for h in hits] == [
        ("history", 5, "user"),
        ("history", 3, "assistant"),
        ("history", 1, "user"),
    ]
    assert hits[2].ts == "t0"
    assert all("green" in h.snippet.lower() and "tea" in h.snippet.lower() for h in hits)
    assert await memory_store.search_history(S, "   ", limit=10) == []
    assert await memory_store.search_history(S, "green juice", limit=10) == []


async def test_search_keeps_the_newest_matches_and_lists_the_summary_last(
    memory_store: MemoryStore,
) -> None:
    await memory_store.append_messages(S, [user(f"note {i} about boats") for i in range(6)])
    await memory_store.save_session_summary(S, "Talked about boats.\n\nThen trains.\n\nBoats!")
    hits = await memory_store.search_history(S, "boats", limit=3)
    assert [(h.source, h.index) for h in hits] == [("history", 5), ("history", 4), ("history", 3)]
    hits = await memory_store.search_history(S, "BOATS", limit=10)
    assert [(h.source, h.index, h.role) for h in hits][-2:] == [
        ("summary", 0, "summary"),
        ("summary", 2, "summary"),
    ]
    assert len(hits) == 8
