"""`squidd mcp list` / `squidd mcp call` and `squidd chat` with MCP servers, as real processes
against real servers (mcp-server-time over stdio), no daemon running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.config import config_sections, write_config
from tests.support.fake_llm import FakeLLM, Reply
from tests.tools.mcp.servers import time_server


def _config(tmp_path: Path, llm_url: str, *servers: dict[str, object]) -> Path:
    sections = config_sections(
        llm_url, tmp_path / "data", api_key="sk-test-mcp-command-0042", mcp={"servers": servers}
    )
    return write_config(tmp_path / "config.toml", sections)


def _squidd(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUIDD_")}
    env["HOME"] = str(config.parent)
    return subprocess.run(
        [sys.executable, "-m", "squidd", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
        check=False,
    )


def test_list_shows_each_server_state_and_tools(tmp_path: Path) -> None:
    missing = {"name": "nope", "command": str(tmp_path / "no-such-server")}
    config = _config(tmp_path, "http://127.0.0.1:9/v1", time_server(), missing)
    result = _squidd(config, "mcp", "list")
    assert result.returncode == 1  # one server is down
    lines = result.stdout.splitlines()
    assert lines[0] == "time (stdio): up, 2 tool(s)"
    assert any(line.startswith("  time__get_current_time  [time] ") for line in lines)
    down = "nope (stdio): down, 0 tool(s) - FileNotFoundError"
    assert any(line.startswith(down) for line in lines)


def test_call_runs_one_tool_and_prints_its_result(tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/v1", time_server())
    arguments = '{"timezone": "Asia/Tokyo"}'
    result = _squidd(config, "mcp", "call", "time", "get_current_time", arguments)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["timezone"] == "Asia/Tokyo"

    unknown = _squidd(config, "mcp", "call", "time", "nosuch")
    assert unknown.returncode == 1
    assert "offers no tool 'nosuch'" in unknown.stderr

    bad = _squidd(config, "mcp", "call", "time", "get_current_time", "[1, 2]")
    assert bad.returncode == 2
    assert "must be a JSON object" in bad.stderr


def test_chat_offers_the_mcp_tools_from_the_first_turn(tmp_path: Path, fake_llm: FakeLLM) -> None:
    config = _config(tmp_path, fake_llm.base_url, time_server())
    fake_llm.push(
        Reply(tool_calls=[("time__get_current_time", {"timezone": "Europe/Paris"})]),
        "it is late",
    )
    result = _squidd(config, "chat", "-m", "what time is it in Paris?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "it is late\n"
    first, second = fake_llm.chat_requests[:2]
    offered = {tool["function"]["name"] for tool in first["tools"]}
    assert {"time__get_current_time", "time__convert_time"} <= offered
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert json.loads(tool_messages[0]["content"])["timezone"] == "Europe/Paris"


def test_config_check_names_the_key_of_a_bad_server(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[[mcp.servers]]\nname = "ok"\ncommand = "x"\n\n'
        '[[mcp.servers]]\nname = "web"\ntransport = "http"\nurl = "ftp://x"\n\n'
        '[[mcp.servers]]\nname = "slow"\ncommand = "x"\ntimeout_s = 0\n'
    )
    result = _squidd(config, "config", "check")
    assert result.returncode == 2
    assert "config: mcp.servers.1: an http server needs 'url'" in result.stderr
    assert "config: mcp.servers.2.timeout_s: " in result.stderr
    assert "mcp.servers.0" not in result.stderr
