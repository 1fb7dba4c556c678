"""AgentLoop: tool loop, extra_tools (document 000), errors as tool results, one append per
turn. The LLM is the real adapter over a mocked HTTP transport; the store is the
`memory_store` fixture (the JSONL files, and the in-memory double)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from squidd.core.agent import AgentLoop
from squidd.core.memory import MemoryManager
from squidd.core.models import HistoryWindow, SessionId, ToolResult
from squidd.core.ports import MemoryStore
from squidd.core.tools import ToolRegistry
from squidd.errors import LLMError, ToolError
from squidd.store.jsonl import JsonlStore
from squidd.tools.memory_write import MemoryWriteTool
from tests.support.agent import agent_loop
from tests.support.fake_llm import Reply
from tests.support.mock_llm import MockLLM, scripted_llm
from tests.support.prompt import StaticPrompt

pytestmark = pytest.mark.anyio

SESSION = SessionId("matrix:!room:example.org")


class EchoTool:
    name = "echo"
    description = "Echo the text back."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    def __init__(self) -> None:
        self.calls: list[Mapping[str, Any]] = []

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        self.calls.append(arguments)
        if "text" not in arguments:
            raise ToolError("echo needs 'text'")
        return ToolResult(f"echoed: {arguments['text']}")


class ExplodingTool(EchoTool):
    name = "explode"

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        raise RuntimeError("kaboom")


def make_loop(
    store: MemoryStore, *replies: Reply | str, registry: ToolRegistry | None = None, **kw: Any
) -> tuple[AgentLoop, MemoryStore, MockLLM]:
    llm, mock = scripted_llm(*replies)
    memory = MemoryManager(store, llm, consolidation_threshold=100)
    loop = agent_loop(
        llm=llm,
        memory=memory,
        registry=registry or ToolRegistry(),
        prompt=StaticPrompt("test prompt"),
        **kw,
    )
    return loop, store, mock


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


async def test_plain_reply_is_returned_and_persisted_once(memory_store: MemoryStore) -> None:
    loop, store, mock = make_loop(memory_store, "hello there")
    reply = await loop.run(SESSION, "hi", "matrix")
    assert reply == "hello there"
    window = await store.load_window(SESSION)
    assert [(m.role, m.content) for m in window.messages] == [
        ("user", "hi"),
        ("assistant", "hello there"),
    ]
    assert mock.requests[0]["messages"][0] == {"role": "system", "content": "test prompt"}


async def test_extra_tool_callable_via_run(memory_store: MemoryStore) -> None:
    loop, _, mock = make_loop(
        memory_store, Reply(tool_calls=[("echo", {"text": "via extra"})]), "done"
    )
    echo = EchoTool()
    reply = await loop.run(SESSION, "go", "matrix", extra_tools=[echo])
    assert reply == "done"
    assert echo.calls == [{"text": "via extra"}]
    assert tool_messages(mock.requests[1])[0]["content"] == "echoed: via extra"
    assert [t["function"]["name"] for t in mock.requests[0]["tools"]] == ["echo"]


async def test_extra_tool_does_not_pollute_registry(memory_store: MemoryStore) -> None:
    registry = ToolRegistry()
    loop, _, mock = make_loop(memory_store, "ok", "ok", registry=registry)
    await loop.run(SESSION, "first", "matrix", extra_tools=[EchoTool()])
    assert registry.names() == []
    await loop.run(SESSION, "second", "matrix")
    assert "tools" not in mock.requests[1]


async def test_extra_tools_dispatched_before_registry(memory_store: MemoryStore) -> None:
    registered, extra = EchoTool(), EchoTool()
    loop, _, _ = make_loop(
        memory_store,
        Reply(tool_calls=[("echo", {"text": "x"})]),
        "done",
        registry=ToolRegistry([registered]),
    )
    await loop.run(SESSION, "go", "matrix", extra_tools=[extra])
    assert extra.calls and not registered.calls


async def test_malformed_tool_arguments_go_back_to_the_model(memory_store: MemoryStore) -> None:
    loop, _, mock = make_loop(
        memory_store, Reply(tool_calls=[("echo", '{"text": "unterminated')]), "sorry"
    )
    reply = await loop.run(SESSION, "go", "matrix", extra_tools=[EchoTool()])
    assert reply == "sorry"
    result = tool_messages(mock.requests[1])[0]["content"]
    assert result.startswith("Error:") and "not valid JSON" in result


async def test_tool_raising_becomes_error_result(memory_store: MemoryStore) -> None:
    loop, _, mock = make_loop(memory_store, Reply(tool_calls=[("explode", {})]), "recovered")
    reply = await loop.run(SESSION, "go", "matrix", extra_tools=[ExplodingTool()])
    assert reply == "recovered"
    assert "kaboom" in tool_messages(mock.requests[1])[0]["content"]


async def test_tool_error_and_unknown_tool(memory_store: MemoryStore) -> None:
    loop, _, mock = make_loop(
        memory_store,
        Reply(tool_calls=[("echo", {}), ("nope", {})]),
        "ok",
    )
    await loop.run(SESSION, "go", "matrix", extra_tools=[EchoTool()])
    results = [m["content"] for m in tool_messages(mock.requests[1])]
    assert results[0] == "Error: echo needs 'text'"
    assert "unknown tool 'nope'" in results[1]


async def test_round_limit_ends_the_turn(memory_store: MemoryStore) -> None:
    calls = [Reply(tool_calls=[("echo", {"text": str(i)})]) for i in range(3)]
    loop, store, mock = make_loop(memory_store, *calls, "what I have so far", max_tool_rounds=3)
    reply = await loop.run(SESSION, "loop forever", "matrix", extra_tools=[EchoTool()])
    assert reply == "what I have so far"
    assert len(mock.requests) == 4
    # The last call is told why and offered no tools.
    assert "limit of 3 rounds" in mock.requests[3]["messages"][-1]["content"]
    assert "tools" not in mock.requests[3]
    window = await store.load_window(SESSION)
    assert window.messages[-1].content == reply


async def test_whole_turn_persisted_in_order(memory_store: MemoryStore) -> None:
    loop, store, _ = make_loop(memory_store, Reply(tool_calls=[("echo", {"text": "a"})]), "final")
    await loop.run(SESSION, "go", "matrix", extra_tools=[EchoTool()])
    roles = [m.role for m in (await store.load_window(SESSION)).messages]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_history_is_sent_on_the_next_turn(memory_store: MemoryStore) -> None:
    loop, _, mock = make_loop(
        memory_store, Reply(tool_calls=[("echo", {"text": "a"})]), "one", "two"
    )
    await loop.run(SESSION, "first", "matrix", extra_tools=[EchoTool()])
    await loop.run(SESSION, "second", "matrix", extra_tools=[EchoTool()])
    sent = mock.requests[2]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[2]["tool_calls"][0]["function"]["name"] == "echo"


async def test_failed_turn_keeps_the_user_message(memory_store: MemoryStore) -> None:
    store = memory_store
    llm, _ = scripted_llm(Reply(status=503), Reply(status=503), max_retries=1)
    loop = agent_loop(
        llm=llm,
        memory=MemoryManager(store, llm),
        registry=ToolRegistry(),
        prompt=StaticPrompt("p"),
    )
    with pytest.raises(LLMError):
        await loop.run(SESSION, "are you there?", "email")
    window = await store.load_window(SESSION)
    assert [(m.role, m.content) for m in window.messages] == [("user", "are you there?")]


async def test_memory_write_via_extra_tools_reaches_other_sessions(
    memory_store: MemoryStore,
) -> None:
    loop, store, mock = make_loop(
        memory_store,
        Reply(tool_calls=[("memory_write", {"content": "Owner's cat is called Miso."})]),
        "noted",
        "hello",
    )
    await loop.run(
        SESSION, "remember my cat", "matrix", extra_tools=[MemoryWriteTool(store, SESSION)]
    )
    other = SessionId("email:owner@example.org")
    await loop.run(other, "hi", "email", extra_tools=[MemoryWriteTool(store, other)])
    system = mock.requests[2]["messages"][0]["content"]
    assert "## Your Memory\n\nOwner's cat is called Miso." in system


async def test_policy_hides_tools(memory_store: MemoryStore) -> None:
    class NoEcho:
        def allows(self, tool: str, channel: str, session: SessionId) -> bool:
            return not (tool == "echo" and channel == "email")

    loop, _, mock = make_loop(memory_store, "a", "b", policy=NoEcho())
    await loop.run(SESSION, "x", "email", extra_tools=[EchoTool()])
    await loop.run(SESSION, "x", "matrix", extra_tools=[EchoTool()])
    assert "tools" not in mock.requests[0]
    assert json.dumps(mock.requests[1]["tools"]).count('"echo"') == 1


async def test_turn_broken_by_anything_else_keeps_the_user_message(
    memory_store: MemoryStore,
) -> None:
    """Not only a model failure: whatever breaks the turn (here the stream's consumer, as a
    terminal whose output went away), the user's message stays in the history."""
    loop, store, _ = make_loop(memory_store, "a reply nobody sees")

    async def broken_output(event: object) -> None:
        raise BrokenPipeError("stdout closed")

    with pytest.raises(BrokenPipeError):
        await loop.run(SESSION, "still there?", "terminal", on_event=broken_output)
    window = await store.load_window(SESSION)
    assert [(m.role, m.content) for m in window.messages] == [("user", "still there?")]


async def test_a_finished_turn_is_reused_on_redelivery(memory_store: MemoryStore) -> None:
    """The daemon died after the turn was saved, before the reply was handed on: the same
    message comes again and gets the stored reply, without a second model call."""
    loop, store, mock = make_loop(
        memory_store, Reply(tool_calls=[("echo", {"text": "a"})]), "the answer", "other"
    )
    first = await loop.run(SESSION, "question", "matrix", extra_tools=[EchoTool()], turn_id="m:1")
    again = await loop.run(SESSION, "question", "matrix", extra_tools=[EchoTool()], turn_id="m:1")
    assert first == again == "the answer"
    assert len(mock.requests) == 2  # the tool round and the answer, nothing more
    await loop.run(SESSION, "next", "matrix", turn_id="m:2")
    assert await loop.run(SESSION, "question", "matrix", turn_id="m:1") == "the answer"
    users = [m for m in (await store.load_window(SESSION)).messages if m.role == "user"]
    assert [m.turn for m in users] == ["m:1", "m:2"]


async def test_an_unfinished_turn_runs_again(memory_store: MemoryStore) -> None:
    loop, _, mock = make_loop(memory_store, Reply(status=400), "now it works", max_tool_rounds=3)
    with pytest.raises(LLMError):
        await loop.run(SESSION, "question", "matrix", turn_id="m:1")
    assert await loop.run(SESSION, "question", "matrix", turn_id="m:1") == "now it works"
    assert len(mock.requests) == 2


class CountingStore(JsonlStore):
    """The real store, counting how often a session's window is read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.window_reads = 0

    async def load_window(self, session_id: SessionId) -> HistoryWindow:
        self.window_reads += 1
        return await super().load_window(session_id)


async def test_a_turn_reads_the_history_window_once(tmp_path: Path) -> None:
    """Checking for a finished turn and building the messages share one read of the window
    (a turn's cost is that window; reading it twice doubled it)."""
    store = CountingStore(tmp_path)
    llm, mock = scripted_llm("first answer", "second answer", "third answer")
    loop = agent_loop(
        llm=llm,
        memory=MemoryManager(store, llm, consolidation_threshold=100),
        registry=ToolRegistry(),
        prompt=StaticPrompt("p"),
    )
    assert await loop.run(SESSION, "one", "matrix", turn_id="m:1") == "first answer"
    assert store.window_reads == 1
    assert await loop.run(SESSION, "two", "matrix", turn_id="m:2") == "second answer"
    assert store.window_reads == 2
    sent = [(m["role"], m["content"]) for m in mock.requests[1]["messages"]]
    assert sent[1:] == [("user", "one"), ("assistant", "first answer"), ("user", "two")]
    assert await loop.run(SESSION, "one", "matrix", turn_id="m:1") == "first answer"
    assert store.window_reads == 3
    assert await loop.run(SESSION, "three", "matrix") == "third answer"  # no turn id
    assert store.window_reads == 4
