"""MemoryManager against the design documents: cursor, two-level memory, meta-consolidation,
warning, keep_recent_ratio. Storage is the `memory_store` fixture (the real JSONL store in a
temp dir, and the in-memory double); the LLM is the real adapter over a mocked HTTP transport."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from squidd.core.budget import PromptBudget
from squidd.core.memory import CONSOLIDATION_WARNING, MemoryManager
from squidd.core.models import Message, SessionId
from squidd.core.ports import MemoryStore
from squidd.store.jsonl import JsonlStore
from tests.support.fake_llm import Reply
from tests.support.mock_llm import MockLLM, scripted_llm

pytestmark = pytest.mark.anyio

S1 = SessionId("s1")


@pytest.fixture
def storage(memory_store: MemoryStore) -> MemoryStore:
    return memory_store


async def add_users(storage: MemoryStore, count: int, session: SessionId = S1) -> None:
    await storage.append_messages(
        session, [Message(role="user", content=f"msg {i}") for i in range(count)]
    )


async def test_cursor_default_is_zero(storage: MemoryStore) -> None:
    assert await storage.load_consolidated_cursor(S1) == 0


async def test_cursor_roundtrip(storage: MemoryStore) -> None:
    await add_users(storage, 50)
    await storage.save_consolidated_cursor(S1, 42)
    assert await storage.load_consolidated_cursor(S1) == 42


async def test_consolidation_uses_cursor_not_full_history(storage: MemoryStore) -> None:
    """After cursor=4 only the messages after it count: 2 < threshold, no consolidation."""
    llm, mock = scripted_llm()
    manager = MemoryManager(storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25)
    await add_users(storage, 6)
    await storage.save_consolidated_cursor(S1, 4)
    messages = await manager.build_messages(S1, "sys", "new")
    # system + the 2 unconsolidated messages + the new user message
    assert [m.content for m in messages[1:]] == ["msg 4", "msg 5", "new"]
    assert await storage.load_session_summary(S1) == ""
    assert mock.requests == []


async def test_consolidation_cursor_advances_after_consolidation(storage: MemoryStore) -> None:
    llm, _ = scripted_llm("Summary: advanced.")
    manager = MemoryManager(storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25)
    await add_users(storage, 5)
    messages = await manager.build_messages(S1, "sys", "new")
    assert await storage.load_consolidated_cursor(S1) == 4  # 5 - keep_recent(1)
    assert await storage.load_session_summary(S1) == "Summary: advanced."
    assert "## Conversation Summary\n\nSummary: advanced." in (messages[0].content or "")
    assert [m.content for m in messages[1:]] == ["msg 4", "new"]


async def test_no_consolidation_above_threshold_if_cursor_covers_it(storage: MemoryStore) -> None:
    llm, mock = scripted_llm()
    manager = MemoryManager(storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25)
    await add_users(storage, 10)
    await storage.save_consolidated_cursor(S1, 9)
    await manager.build_messages(S1, "sys", "new")
    assert mock.requests == []


async def test_consolidation_survives_restart(tmp_path: Path) -> None:
    """A new manager and store on the same dir (a new process) does not consolidate again."""
    llm, mock = scripted_llm("first summary")
    await add_users(JsonlStore(tmp_path), 8)
    first = MemoryManager(JsonlStore(tmp_path), llm, consolidation_threshold=6)
    await first.build_messages(S1, "sys", "hi")
    assert len(mock.requests) == 1
    again = MemoryManager(JsonlStore(tmp_path), llm, consolidation_threshold=6)
    await again.build_messages(S1, "sys", "hi")
    assert len(mock.requests) == 1


async def test_summary_appends_across_cycles(storage: MemoryStore) -> None:
    llm, _ = scripted_llm("one", "two")
    manager = MemoryManager(storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25)
    await add_users(storage, 5)
    await manager.build_messages(S1, "sys", "x")
    await add_users(storage, 5)
    await manager.build_messages(S1, "sys", "x")
    assert await storage.load_session_summary(S1) == "one\n\ntwo"


async def test_consolidation_failure_keeps_history_and_cursor(storage: MemoryStore) -> None:
    llm, _ = scripted_llm(Reply(status=400))
    manager = MemoryManager(storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25)
    await add_users(storage, 5)
    messages = await manager.build_messages(S1, "sys", "new")
    assert len(messages) == 7  # nothing dropped: the model still sees all 5
    assert await storage.load_consolidated_cursor(S1) == 0


async def test_window_never_starts_inside_a_turn(storage: MemoryStore) -> None:
    """keep_recent=1 would split a tool exchange; the window starts at the turn's user message."""
    from squidd.core.models import ToolCall

    turn = [
        Message(role="user", content="old"),
        Message(role="assistant", content="ok"),
        Message(role="user", content="look it up"),
        Message(role="assistant", tool_calls=(ToolCall("c1", "search_history", "{}"),)),
        Message(role="tool", content="found", tool_call_id="c1", name="search_history"),
        Message(role="assistant", content="here it is"),
    ]
    await storage.append_messages(S1, turn)
    llm, _ = scripted_llm("summary")
    manager = MemoryManager(storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25)
    messages = await manager.build_messages(S1, "sys", "next")
    assert [m.role for m in messages[1:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert await storage.load_consolidated_cursor(S1) == 2


# --- global memory vs session summary (document 002) ---------------------------------------


async def test_global_memory_shown_in_every_session(storage: MemoryStore) -> None:
    manager = MemoryManager(storage)
    await storage.save_global_memory("User prefers tea.")
    for session in (SessionId("a"), SessionId("b")):
        messages = await manager.build_messages(session, "sys", "hi")
        assert "## Your Memory\n\nUser prefers tea." in (messages[0].content or "")


async def test_session_summary_only_in_its_own_session(storage: MemoryStore) -> None:
    manager = MemoryManager(storage)
    await storage.save_session_summary(SessionId("a"), "We planned the trip.")
    a = await manager.build_messages(SessionId("a"), "sys", "hi")
    b = await manager.build_messages(SessionId("b"), "sys", "hi")
    assert "We planned the trip." in (a[0].content or "")
    assert "We planned the trip." not in (b[0].content or "")


async def test_system_prompt_order(storage: MemoryStore) -> None:
    manager = MemoryManager(storage, consolidation_threshold=3, keep_recent_ratio=0.34)
    await storage.save_global_memory("GLOBAL")
    await storage.save_session_summary(S1, "SUMMARY")
    await add_users(storage, 2)
    system = (await manager.build_messages(S1, "BASE", "hi"))[0].content or ""
    positions = [system.index(x) for x in ("BASE", "## Your Memory", "## Conversation Summary")]
    assert positions == sorted(positions)
    assert system.endswith(CONSOLIDATION_WARNING)


async def test_consolidation_does_not_touch_global_memory(storage: MemoryStore) -> None:
    llm, _ = scripted_llm("session facts")
    manager = MemoryManager(storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25)
    await storage.save_global_memory("keep me")
    await add_users(storage, 5)
    await manager.build_messages(S1, "sys", "x")
    assert await storage.load_global_memory() == "keep me"


# --- _call_llm and meta-consolidation (document 003) ----------------------------------------


async def test_call_llm_returns_text_on_success(storage: MemoryStore) -> None:
    llm, _ = scripted_llm("hello world")
    manager = MemoryManager(storage, llm)
    assert await manager._call_llm([Message(role="user", content="x")]) == "hello world"


async def test_call_llm_returns_none_on_exception(storage: MemoryStore) -> None:
    llm, _ = scripted_llm(Reply(status=500), max_retries=0)
    manager = MemoryManager(storage, llm)
    with capture_logs() as logs:
        assert await manager._call_llm([Message(role="user", content="x")]) is None
    assert any(e["event"] == "consolidation_llm_failed" for e in logs)


async def test_call_llm_returns_none_on_empty_response(storage: MemoryStore) -> None:
    llm, _ = scripted_llm(Reply(content=""))
    manager = MemoryManager(storage, llm)
    assert await manager._call_llm([Message(role="user", content="x")]) is None


async def test_meta_consolidation_triggered_above_word_limit(storage: MemoryStore) -> None:
    llm, mock = scripted_llm("new part", "compressed summary")
    manager = MemoryManager(storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25)
    await storage.save_session_summary(S1, "word " * 700)
    await add_users(storage, 5)
    await manager.build_messages(S1, "sys", "x")
    assert await storage.load_session_summary(S1) == "compressed summary"
    assert len(mock.requests) == 2
    meta_prompt = mock.requests[1]["messages"][-1]["content"]
    assert "approximately 8 sentences" in meta_prompt
    assert "new part" in meta_prompt


async def test_meta_consolidation_not_triggered_below_word_limit(storage: MemoryStore) -> None:
    llm, mock = scripted_llm("new part")
    manager = MemoryManager(storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25)
    await storage.save_session_summary(S1, "word " * 100)
    await add_users(storage, 5)
    await manager.build_messages(S1, "sys", "x")
    assert len(mock.requests) == 1
    assert (await storage.load_session_summary(S1)).endswith("new part")


async def test_meta_consolidation_failure_keeps_original_summary(storage: MemoryStore) -> None:
    mock = MockLLM()
    llm, _ = scripted_llm("new part", Reply(status=400), mock=mock)
    manager = MemoryManager(storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25)
    long_summary = "word " * 700
    await storage.save_session_summary(S1, long_summary)
    await add_users(storage, 5)
    await manager.build_messages(S1, "sys", "x")
    saved = await storage.load_session_summary(S1)
    assert saved == f"{long_summary.strip()}\n\nnew part"
    assert await storage.load_consolidated_cursor(S1) == 4


async def test_meta_consolidation_triggered_past_the_summary_share(storage: MemoryStore) -> None:
    """Under 600 words but past the budget's summary share: compressed, not cut, so the
    prompt's summary stays within its share however old the session is."""
    llm, mock = scripted_llm("new part", "compressed summary")
    budget = PromptBudget(context_window=100_000, summary_tokens=100)
    manager = MemoryManager(
        storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25, budget=budget
    )
    await storage.save_session_summary(S1, "word " * 200)
    await add_users(storage, 5)
    messages = await manager.build_messages(S1, "sys", "x")
    assert len(mock.requests) == 2
    assert "approximately 8 sentences" in mock.requests[1]["messages"][-1]["content"]
    assert await storage.load_session_summary(S1) == "compressed summary"
    system = messages[0].content or ""
    assert system.endswith("## Conversation Summary\n\ncompressed summary")


async def test_a_summary_past_its_share_keeps_its_newest_part_in_the_prompt(
    storage: MemoryStore,
) -> None:
    """Until meta-consolidation compresses it (no model here), the prompt shows the
    summary's end: the newest consolidation is its last part. The stored summary stays whole."""
    manager = MemoryManager(
        storage, None, budget=PromptBudget(context_window=100_000, summary_tokens=100)
    )
    whole = "old " * 400 + "the newest fact"
    await storage.save_session_summary(S1, whole)
    system = (await manager.build_messages(S1, "sys", "x"))[0].content or ""
    shown = system.split("## Conversation Summary\n\n", 1)[1]
    assert shown.startswith("[older part left out to fit the prompt budget]\n")
    assert shown.endswith("the newest fact")
    assert len(shown) <= 100 * manager.estimator.ratio()
    assert await storage.load_session_summary(S1) == whole


@pytest.mark.parametrize("summary_tokens", [1_000, 0])
async def test_meta_consolidation_not_triggered_within_the_summary_share(
    storage: MemoryStore, summary_tokens: int
) -> None:
    """Within the share (or with no share, 0), only the 600-word limit compresses."""
    llm, mock = scripted_llm("new part")
    budget = PromptBudget(context_window=100_000, summary_tokens=summary_tokens)
    manager = MemoryManager(
        storage, llm, consolidation_threshold=4, keep_recent_ratio=0.25, budget=budget
    )
    await storage.save_session_summary(S1, "word " * 200)
    await add_users(storage, 5)
    await manager.build_messages(S1, "sys", "x")
    assert len(mock.requests) == 1
    assert (await storage.load_session_summary(S1)).endswith("new part")


# --- warning and keep_recent_ratio (document 004) --------------------------------------------


async def test_consolidation_warning_fires_one_turn_before_threshold(storage: MemoryStore) -> None:
    manager = MemoryManager(storage, None, consolidation_threshold=10, keep_recent_ratio=0.3)
    await add_users(storage, 8)
    messages = await manager.build_messages(S1, "sys", "new")
    assert "will soon be summarized" in (messages[0].content or "")


async def test_consolidation_warning_does_not_fire_below_threshold(storage: MemoryStore) -> None:
    manager = MemoryManager(storage, None, consolidation_threshold=10, keep_recent_ratio=0.3)
    await add_users(storage, 7)
    messages = await manager.build_messages(S1, "sys", "new")
    assert "will soon be summarized" not in (messages[0].content or "")


async def test_warning_counts_only_unconsolidated_messages(storage: MemoryStore) -> None:
    manager = MemoryManager(storage, None, consolidation_threshold=10, keep_recent_ratio=0.3)
    await add_users(storage, 50)
    await storage.save_consolidated_cursor(S1, 45)
    messages = await manager.build_messages(S1, "sys", "new")
    assert "will soon be summarized" not in (messages[0].content or "")


@pytest.mark.parametrize(
    ("threshold", "ratio", "kept"), [(10, 0.3, 3), (5, 0.4, 2), (3, 0.34, 1), (100, 0.2, 20)]
)
async def test_keep_recent_ratio_scales_with_threshold(
    storage: MemoryStore, threshold: int, ratio: float, kept: int
) -> None:
    manager = MemoryManager(
        storage, None, consolidation_threshold=threshold, keep_recent_ratio=ratio
    )
    assert manager.keep_recent == kept


@pytest.mark.parametrize("ratio", [0.0, 1.0, 1.5, -0.1])
def test_manager_rejects_bad_ratio(tmp_path: Path, ratio: float) -> None:
    with pytest.raises(ValueError, match="keep_recent_ratio"):
        MemoryManager(JsonlStore(tmp_path), None, keep_recent_ratio=ratio)
