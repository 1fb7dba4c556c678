"""`TurnTools.for_turn`, the one function that decides a turn's per-call tools, for every
kind of turn; and that they are built anew for each call (bound to one session)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squidd.config import Settings
from squidd.core.models import Inbound, InboundKind, SessionId
from squidd.core.ports import Tool
from squidd.core.reply_files import ReplyFiles
from squidd.gateway.runtime import build_runtime
from squidd.gateway.turn_tools import TurnScope, TurnTools
from squidd.tools.spawn import SUB_MARK

pytestmark = pytest.mark.anyio

MEMORY = ["memory_write", "search_history"]
CRON = ["cron_add", "cron_list", "cron_remove"]


def settings_for(tmp_path: Path, **sections: Any) -> Settings:
    return Settings.model_validate(
        {
            "llm": {"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-turn-tools"},
            "storage": {"data_dir": str(tmp_path)},
            **sections,
        }
    )


class _Hub:
    """The MCP hub's per-turn view: the tools of the servers up right now."""

    def __init__(self, tools: list[Tool]) -> None:
        self.up = tools

    def tools(self) -> list[Tool]:
        return list(self.up)


def names(tools: list[Tool]) -> list[str]:
    return [tool.name for tool in tools]


async def test_every_kind_of_turn_gets_its_tools_from_one_place(tmp_path: Path) -> None:
    runtime = build_runtime(settings_for(tmp_path))
    try:
        mcp_tool = runtime.registry.tools()[0]  # any tool stands in for a server's
        tools = TurnTools(runtime, mcp=_Hub([mcp_tool]))  # type: ignore[arg-type]
        mcp = [mcp_tool.name]
        session = SessionId("!room:example.org")
        message = Inbound(
            channel="matrix", source_id="$1", session_id=session, sender="@a:x", text="hi"
        )
        cron = Inbound(
            channel="cron",
            source_id="job@t",
            session_id=session,
            sender="",
            text="remind",
            kind=InboundKind.CRON,
        )
        files = ReplyFiles()
        # A channel's message: its answer can carry a file.
        assert names(tools.for_turn(TurnScope.of(message, files))) == [
            *MEMORY,
            *CRON,
            "spawn",
            "send_file",
            *mcp,
        ]
        # A cron run with no target: nothing to carry a file to.
        assert names(tools.for_turn(TurnScope.of(cron))) == [*MEMORY, *CRON, "spawn", *mcp]
        # The terminal, as `squidd chat` asks.
        terminal = TurnScope(SessionId("terminal:t"), "terminal")
        assert names(tools.for_turn(terminal)) == [*MEMORY, *CRON, "spawn", *mcp]
        # A sub-agent's own turn: its history only (nesting is off by default).
        sub_session = SessionId(f"!room:example.org{SUB_MARK}0123456789")
        sub = TurnScope(sub_session, "matrix", sub_agent=True)
        assert names(tools.for_turn(sub)) == ["search_history"]
        # Built anew per call: two turns never share a session-bound tool.
        first, second = tools.for_turn(terminal), tools.for_turn(terminal)
        assert all(a is not b for a, b in zip(first[:2], second[:2], strict=True))
    finally:
        await runtime.aclose()


async def test_what_the_settings_turn_off_is_not_offered(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, cron={"enabled": False}, tools={"spawn": {"enabled": False}})
    runtime = build_runtime(settings)
    try:
        scope = TurnScope(SessionId("terminal:t"), "terminal", reply_files=ReplyFiles())
        assert names(TurnTools(runtime).for_turn(scope)) == [*MEMORY, "send_file"]
    finally:
        await runtime.aclose()
