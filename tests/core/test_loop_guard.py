"""Loop breakers: the same tool with the same arguments K times in a row, the round
limit and the wall-clock limit end the tool calls; the model is told why and asked for a
final answer without tools. The LLM is the real adapter over a mocked transport."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from squidd.core.agent import AgentLoop
from squidd.core.loop_guard import LoopGuard
from squidd.core.memory import MemoryManager
from squidd.core.models import SessionId, ToolCall, ToolResult
from squidd.core.tools import ToolRegistry
from squidd.store.jsonl import JsonlStore
from tests.support.agent import agent_loop
from tests.support.fake_llm import Reply
from tests.support.mock_llm import scripted_llm
from tests.support.prompt import StaticPrompt

pytestmark = pytest.mark.anyio

SESSION = SessionId("email:owner@example.org")


class CountTool:
    name = "lookup"
    description = "Look something up."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
    }

    def __init__(self) -> None:
        self.calls = 0

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        self.calls += 1
        return ToolResult("nothing new")


def _loop(tmp_path: Path, *replies: Reply | str, **kw: Any) -> tuple[AgentLoop, Any, CountTool]:
    llm, mock = scripted_llm(*replies)
    tool = CountTool()
    loop = agent_loop(
        llm=llm,
        memory=MemoryManager(JsonlStore(tmp_path, workspace_dir=tmp_path / "ws")),
        registry=ToolRegistry([tool]),
        prompt=StaticPrompt("sys"),
        **kw,
    )
    return loop, mock, tool


async def test_a_tool_called_5_times_with_the_same_arguments_is_broken_off(
    tmp_path: Path,
) -> None:
    same = [Reply(tool_calls=[("lookup", {"q": "weather"})]) for _ in range(5)]
    loop, mock, tool = _loop(tmp_path, *same[:3], "It keeps saying nothing new.")
    reply = await loop.run(SESSION, "what is the weather", "email")
    assert reply == "It keeps saying nothing new."
    assert tool.calls == 3  # K = 3 (the default), not 5
    final = mock.requests[-1]
    assert "tools" not in final
    assert "lookup with the same arguments 3 times in a row" in final["messages"][-1]["content"]
    # The notice is not part of the stored history: the turn ends with the reply.
    window = await loop._memory.load_window(SESSION)
    assert [m.role for m in window.messages] == ["user", *["assistant", "tool"] * 3, "assistant"]


async def test_different_arguments_are_not_a_repetition(tmp_path: Path) -> None:
    varied = [Reply(tool_calls=[("lookup", {"q": f"page {i}"})]) for i in range(4)]
    loop, mock, tool = _loop(tmp_path, *varied, "done")
    assert await loop.run(SESSION, "read all pages", "email") == "done"
    assert tool.calls == 4
    assert "tools" in mock.requests[-1]


async def test_the_wall_clock_limit_asks_for_a_final_answer(tmp_path: Path) -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 70.0
        return now[0]

    calls = [Reply(tool_calls=[("lookup", {"q": str(i)})]) for i in range(2)]
    loop, mock, tool = _loop(tmp_path, *calls, "partial", max_turn_seconds=120.0, monotonic=clock)
    assert await loop.run(SESSION, "slow work", "email") == "partial"
    assert tool.calls == 2
    assert "time limit of 120 seconds" in mock.requests[-1]["messages"][-1]["content"]


def test_whitespace_in_arguments_does_not_hide_a_repetition() -> None:
    guard = LoopGuard(max_rounds=20, max_repeats=2, max_seconds=60, monotonic=lambda: 0.0)
    guard.note([ToolCall("1", "lookup", '{"q": "x"}')])
    assert guard.reason() is None
    guard.note([ToolCall("2", "lookup", '{ "q":"x" }')])
    assert guard.reason() is not None
