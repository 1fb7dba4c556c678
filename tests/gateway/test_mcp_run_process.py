"""`squidd run` as a real process with an MCP server configured: the scripted model calls
`time__get_current_time` (mcp-server-time over stdio), the reply comes out of the spool
channel, and `squidd status` shows the server. The shape the combined end-to-end test of
MCP, skills, web search and sub-agents builds on."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.daemon import run_squidd
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.spool_daemon import (
    Daemon,
    ask,
    replies,
    spool_config,
    start_ready,
    wait_until,
)
from tests.tools.mcp.servers import time_server


def test_a_turn_calls_an_mcp_tool_through_squidd_run(
    tmp_path: Path, fake_llm: FakeLLM, daemons: list[Daemon]
) -> None:
    config = spool_config(tmp_path, fake_llm.base_url, mcp={"servers": [time_server()]})
    data = tmp_path / "data"
    fake_llm.push(
        Reply(tool_calls=[("time__get_current_time", {"timezone": "Asia/Tokyo"})]),
        "it is morning in Tokyo",
    )
    daemon = start_ready(tmp_path, config, daemons)
    wait_until(lambda: "mcp_server_up" in daemon.log_text())

    ask(data, "t1", "what time is it in Tokyo?")
    assert replies(data, "t1")[0]["text"] == "it is morning in Tokyo"
    tool_messages = [m for m in fake_llm.chat_requests[1]["messages"] if m["role"] == "tool"]
    assert json.loads(tool_messages[0]["content"])["timezone"] == "Asia/Tokyo"

    status = run_squidd(config, "status")
    assert status.returncode == 0, status.stderr
    assert "MCP servers:" in status.stdout
    assert "time       up           2 tool(s)" in status.stdout

    assert daemon.terminate() == 0
