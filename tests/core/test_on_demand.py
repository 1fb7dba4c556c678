"""Tool schemas cost tokens on every call: on-demand tools are sent only after the model
asks with `load_tools`, and tools a channel's policy refuses are never sent at all."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from squidd.core.agent import AgentLoop
from squidd.core.memory import MemoryManager
from squidd.core.models import SessionId, ToolResult
from squidd.core.tools import ToolRegistry
from squidd.store.jsonl import JsonlStore
from tests.support.agent import agent_loop
from tests.support.fake_llm import Reply
from tests.support.mock_llm import scripted_llm
from tests.support.prompt import StaticPrompt

pytestmark = pytest.mark.anyio

SESSION = SessionId("matrix:!od:example.org")


class Named:
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def __init__(self, name: str, description: str) -> None:
        self.name = name
        self.description = description
        self.calls = 0

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        self.calls += 1
        return ToolResult(f"{self.name} ran")


class DenyOnEmail:
    def allows(self, tool: str, channel: str, session: SessionId) -> bool:
        return not (channel == "email" and tool == "cron_add")


def names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def _loop(tmp_path: Path, *replies: Reply | str, **kw: Any) -> tuple[AgentLoop, Any, list[Named]]:
    llm, mock = scripted_llm(*replies)
    tools = [Named("read_file", "Read a file."), Named("cron_add", "Add a scheduled job. More.")]
    loop = agent_loop(
        llm=llm,
        memory=MemoryManager(JsonlStore(tmp_path, workspace_dir=tmp_path / "ws")),
        registry=ToolRegistry(tools),
        prompt=StaticPrompt("sys"),
        on_demand=["cron_*"],
        **kw,
    )
    return loop, mock, tools


async def test_on_demand_schemas_are_sent_only_after_load_tools(tmp_path: Path) -> None:
    loop, mock, tools = _loop(
        tmp_path,
        Reply(tool_calls=[("load_tools", {"names": ["cron_*"]})]),
        Reply(tool_calls=[("cron_add", {})]),
        "scheduled",
    )
    assert await loop.run(SESSION, "remind me daily", "matrix") == "scheduled"
    first, second, third = (names(body) for body in mock.requests)
    assert first == ["read_file", "load_tools"]
    loader = mock.requests[0]["tools"][1]["function"]["description"]
    assert "cron_add: Add a scheduled job" in loader and "More" not in loader
    assert second == ["read_file", "load_tools", "cron_add"]
    assert third == second
    assert tools[1].calls == 1


async def test_an_on_demand_tool_called_by_name_still_runs(tmp_path: Path) -> None:
    loop, _, tools = _loop(tmp_path, Reply(tool_calls=[("cron_add", {})]), "done")
    assert await loop.run(SESSION, "go", "matrix") == "done"
    assert tools[1].calls == 1


async def test_a_tool_the_policy_refuses_is_never_offered_even_on_demand(tmp_path: Path) -> None:
    loop, mock, _ = _loop(tmp_path, "hi", policy=DenyOnEmail())
    await loop.run(SessionId("email:a@example.org"), "hello", "email")
    assert names(mock.requests[0]) == ["read_file"]  # no cron_add, so no load_tools either
