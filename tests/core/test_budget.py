"""The prompt's token budget: consolidation on tokens (cursor and warning as the seeds
say), history fitted newest-first with old tool results shrunk first, capped prompt
parts, an estimate calibrated from reported usage, and a context-length-exceeded error
recovered in the same turn. The LLM is the real adapter over a mocked transport."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squidd.core.budget import PromptBudget, fit_history
from squidd.core.estimator import TokenEstimator, messages_chars
from squidd.core.memory import CONSOLIDATION_WARNING, MemoryManager
from squidd.core.models import Message, SessionId, ToolCall
from squidd.core.tools import ToolRegistry
from squidd.store.jsonl import JsonlStore
from tests.support.agent import agent_loop
from tests.support.fake_llm import Reply
from tests.support.mock_llm import scripted_llm
from tests.support.prompt import StaticPrompt

pytestmark = pytest.mark.anyio

SESSION = SessionId("matrix:!budget:example.org")


def exchange(i: int, size: int) -> list[Message]:
    return [
        Message(role="user", content=f"question {i} " + "q" * size),
        Message(role="assistant", content=f"answer {i} " + "a" * size),
    ]


def store_at(tmp_path: Path) -> JsonlStore:
    return JsonlStore(tmp_path / "data", workspace_dir=tmp_path / "ws")


async def test_consolidation_triggers_on_tokens_below_the_message_threshold(
    tmp_path: Path,
) -> None:
    store = store_at(tmp_path)
    for i in range(4):  # 8 messages, far below the threshold of 100, but ~4,600 tokens
        await store.append_messages(SESSION, exchange(i, 2000))
    llm, mock = scripted_llm("they talked about q and a")
    budget = PromptBudget(context_window=4000, context_budget=0.5)  # 2,000 tokens
    memory = MemoryManager(store, llm=llm, budget=budget)
    messages = await memory.build_messages(SESSION, "sys", "next")
    assert len(mock.requests) == 1  # the consolidation call
    cursor = await store.load_consolidated_cursor(SESSION)
    assert cursor == 6  # the seeds' cursor: the number of messages summarised
    assert "## Conversation Summary\n\nthey talked about q and a" in str(messages[0].content)
    assert [m.content for m in messages[1:-1]] == [m.content for m in exchange(3, 2000)]
    assert memory.estimator.messages(messages) <= budget.tokens


async def test_the_token_warning_fires_one_turn_before(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    budget = PromptBudget(context_window=4000, context_budget=0.5)
    memory = MemoryManager(store, budget=budget)  # no LLM: nothing is consolidated
    await store.append_messages(SESSION, exchange(0, 1500))  # ~860 tokens
    first = await memory.build_messages(SESSION, "sys", "next")
    assert CONSOLIDATION_WARNING not in str(first[0].content)
    await store.append_messages(SESSION, exchange(1, 1500))  # one more would cross ~2,000
    second = await memory.build_messages(SESSION, "sys", "next")
    assert CONSOLIDATION_WARNING in str(second[0].content)


def test_old_tool_results_shrink_before_turns_are_left_out() -> None:
    estimator = TokenEstimator()
    call = ToolCall("c1", "dump", "{}")
    old_turn = [
        Message(role="user", content="dump it"),
        Message(role="assistant", tool_calls=(call,)),
        Message(role="tool", content="x" * 20_000 + "\nsee tool-results/f.txt", tool_call_id="c1"),
        Message(role="assistant", content="dumped"),
    ]
    new_turn = exchange(9, 100)
    fitted = fit_history([*old_turn, *new_turn], 600, estimator)
    assert len(fitted) == 6  # every turn kept: the old result shrank instead
    assert len(fitted[2].content or "") < 1000 and "tool-results/f.txt" in str(fitted[2].content)
    tiny = fit_history([*old_turn, *new_turn], 80, estimator)
    assert tiny == new_turn  # the oldest turn left out whole, at a user message


async def test_memory_md_is_capped_in_the_prompt(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    await store.save_global_memory("fact " * 10_000)
    memory = MemoryManager(store, budget=PromptBudget(context_window=128_000, memory_tokens=500))
    system = str((await memory.build_messages(SESSION, "sys", "hi"))[0].content)
    assert "[cut to fit the prompt budget]" in system
    assert memory.estimator.tokens(len(system)) < 600


async def test_the_estimate_converges_to_the_reported_usage_within_5_calls(
    tmp_path: Path,
) -> None:
    """The scripted provider counts 2.6 characters per token plus 50 tokens of framing."""
    seen: list[tuple[int, int]] = []

    def provider(body: dict[str, Any]) -> Reply:
        chars = sum(len(m.get("content") or "") for m in body["messages"])
        prompt = int(chars / 2.6) + 50
        seen.append((len(body["messages"]), prompt))
        return Reply(content="ok " * 40, usage=(prompt, 40, 0))

    llm, _ = scripted_llm(*[provider] * 7)
    memory = MemoryManager(store_at(tmp_path), budget=PromptBudget(context_window=128_000))
    loop = agent_loop(
        llm=llm, memory=memory, registry=ToolRegistry(), prompt=StaticPrompt("system " * 50)
    )
    errors = []
    for i in range(7):
        message = f"message {i} " + "word " * (100 * (i + 1))
        base = await memory.build_messages(SESSION, "system " * 50, message)
        estimate = memory.estimator.messages(base)
        await loop.run(SESSION, message, "matrix")
        errors.append(abs(estimate - seen[-1][1]) / seen[-1][1])
    assert errors[0] > 0.15  # the uncalibrated guess is off
    assert all(error <= 0.10 for error in errors[5:]), errors


async def test_context_length_exceeded_is_recovered_in_the_same_turn(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    for i in range(6):
        await store.append_messages(SESSION, exchange(i, 300))
    llm, mock = scripted_llm(
        Reply(status=400, error_code="context_length_exceeded"),
        "summary of the six exchanges",
        "here is my answer",
    )
    memory = MemoryManager(store, llm=llm, budget=PromptBudget(context_window=128_000))
    loop = agent_loop(llm=llm, memory=memory, registry=ToolRegistry(), prompt=StaticPrompt("s"))
    assert await loop.run(SESSION, "and now?", "matrix") == "here is my answer"
    first, _, retry = mock.requests
    assert len(retry["messages"]) < len(first["messages"])
    assert "summary of the six exchanges" in retry["messages"][0]["content"]
    assert await store.load_consolidated_cursor(SESSION) > 0
    window = await store.load_window(SESSION)
    assert window.messages[-1].content == "here is my answer"


async def test_a_second_overflow_in_the_same_turn_is_an_error(tmp_path: Path) -> None:
    from squidd.errors import LLMContextOverflowError

    overflow = Reply(status=400, error_code="context_length_exceeded")
    llm, _ = scripted_llm(overflow, overflow)
    memory = MemoryManager(store_at(tmp_path), budget=PromptBudget(context_window=128_000))
    loop = agent_loop(llm=llm, memory=memory, registry=ToolRegistry(), prompt=StaticPrompt("s"))
    with pytest.raises(LLMContextOverflowError):
        await loop.run(SESSION, "hello", "matrix")


def test_messages_chars_counts_tool_calls() -> None:
    call = ToolCall("c", "name", '{"a": 1}')
    assert messages_chars([Message(role="assistant", tool_calls=(call,))]) > 20


async def test_extra_prompt_parts_have_their_own_cap(tmp_path: Path) -> None:
    llm, mock = scripted_llm("ok")
    memory = MemoryManager(
        store_at(tmp_path), budget=PromptBudget(context_window=128_000, extra_tokens=100)
    )
    loop = agent_loop(llm=llm, memory=memory, registry=ToolRegistry(), prompt=StaticPrompt("s"))
    index = "<skills>" + "<skill name='x'/>" * 500 + "</skills>"
    await loop.run(SESSION, "hi", "matrix", extra_parts=[index])
    system = mock.requests[0]["messages"][0]["content"]
    assert system.startswith("s\n\n<skills>") and "[cut to fit the prompt budget]" in system
    assert len(system) < 500
