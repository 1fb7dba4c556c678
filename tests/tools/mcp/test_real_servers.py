"""MCP tool sources against real servers nobody here wrote: `mcp-server-time` and
`mcp-server-git` (PyPI, over stdio) and a streamable-HTTP server written with the SDK."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from squidd.core.ports import ChannelState
from tests.tools.mcp.servers import (
    free_port,
    git_server,
    http_server,
    running_http_server,
    supervised_hub,
    time_server,
    wait_for,
)

pytestmark = pytest.mark.anyio


def _by_name(tools: list) -> dict:  # type: ignore[type-arg]
    return {tool.name: tool for tool in tools}


async def test_time_server_over_stdio_offers_namespaced_tools_that_answer() -> None:
    async with supervised_hub(time_server()) as (hub, _):
        tools = _by_name(hub.tools())
        assert {"time__get_current_time", "time__convert_time"} <= set(tools)
        schema = tools["time__get_current_time"].parameters
        assert schema["type"] == "object" and "timezone" in schema["properties"]
        result = await tools["time__get_current_time"].execute({"timezone": "Europe/Paris"})
        assert not result.is_error
        assert json.loads(result.content)["timezone"] == "Europe/Paris"
        assert hub.snapshot() == [
            {"name": "time", "transport": "stdio", "state": "up", "tools": 2, "last_error": ""}
        ]


async def test_a_server_error_is_a_tool_error_not_a_crash() -> None:
    async with supervised_hub(time_server()) as (hub, _):
        tools = _by_name(hub.tools())
        result = await tools["time__get_current_time"].execute({"timezone": "Not/AZone"})
        assert result.is_error
        assert "Not/AZone" in result.content


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "notes.txt").write_text("hello\n")
    return repo


async def test_git_server_on_a_temporary_repository(repo: Path) -> None:
    async with supervised_hub(git_server(repo)) as (hub, _):
        tools = _by_name(hub.tools())
        assert "git__git_status" in tools
        result = await tools["git__git_status"].execute({"repo_path": str(repo)})
        assert not result.is_error
        assert "notes.txt" in result.content


async def test_enabled_and_disabled_tools_choose_what_is_offered(tmp_path: Path) -> None:
    server = {**time_server(), "enabled_tools": ["*_time"], "disabled_tools": ["convert_*"]}
    async with supervised_hub(server) as (hub, _):
        assert [tool.name for tool in hub.tools()] == ["time__get_current_time"]


async def test_http_server_killed_mid_conversation_tools_go_and_come_back() -> None:
    port = free_port()
    with running_http_server(port) as first:
        async with supervised_hub(http_server(port)) as (hub, supervisor):
            tools = _by_name(hub.tools())
            assert {"web__add", "web__echo"} <= set(tools)
            assert (await tools["web__add"].execute({"a": 2, "b": 3})).content == "5"

            first.kill()
            first.wait()
            await wait_for(lambda: not hub.tools(), "the tools to go")
            assert hub.servers["web"].snapshot()["state"] != "up"
            assert hub.servers["web"].last_error
            # an adapter kept from before the drop answers with a tool error, not a hang
            stale = await tools["web__add"].execute({"a": 1, "b": 1})
            assert stale.is_error and "not connected" in stale.content
            await wait_for(
                lambda: supervisor.children["mcp:web"].state is ChannelState.RECONNECTING,
                "the supervisor to retry",
            )

            with running_http_server(port):
                await wait_for(lambda: bool(hub.tools()), "the tools to come back")
                again = _by_name(hub.tools())
                assert (await again["web__add"].execute({"a": 20, "b": 22})).content == "42"
                assert supervisor.children["mcp:web"].restarts >= 1


async def test_a_server_that_never_starts_does_not_block_the_others(tmp_path: Path) -> None:
    missing = {"name": "nope", "command": str(tmp_path / "no-such-server")}
    async with supervised_hub(missing, time_server()) as (hub, supervisor):
        assert await hub.wait_connected(30) == ["nope"]
        assert [tool.name for tool in hub.tools()] == [
            "time__get_current_time",
            "time__convert_time",
        ]
        nope = hub.servers["nope"].snapshot()
        assert nope["state"] == "down" and nope["tools"] == 0 and nope["last_error"]
        assert supervisor.children["mcp:nope"].state is ChannelState.RECONNECTING


async def test_nul_and_controls_from_an_http_server_reach_the_model_as_valid_text() -> None:
    port = free_port()
    with running_http_server(port):
        async with supervised_hub(http_server(port)) as (hub, _):
            echo = _by_name(hub.tools())["web__echo"]
            result = await echo.execute({"text": "a\x00b\x1b[2Jc\x07 d\x85e\tf"})
    assert not result.is_error
    assert result.content == "ab[2Jc de\tf"
