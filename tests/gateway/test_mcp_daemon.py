"""The daemon with an MCP server: its tools join turns while it is up, vanish when it is
killed (the daemon keeps answering), come back after the reconnect, obey the channel policy,
and show in the status document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squidd.commands.status import format_status
from squidd.config import Settings
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import eventually, make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel
from tests.tools.mcp.servers import free_port, http_server, running_http_server

pytestmark = pytest.mark.anyio


def with_web_server(
    tmp_path: Path, fake_llm: FakeLLM, **sections: dict[str, Any]
) -> tuple[int, Settings]:
    """A free port for the MCP server `web` (over HTTP) and the daemon's settings naming it,
    with `sections` (an `mcp` section adds to the server list's)."""
    port = free_port()
    mcp = {**sections.pop("mcp", {}), "servers": [http_server(port)]}
    return port, make_settings(tmp_path / "data", fake_llm.base_url, mcp=mcp, **sections)


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def test_tools_follow_the_server_through_a_kill_and_a_reconnect(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    port, settings = with_web_server(tmp_path, fake_llm, mcp={"ping_interval_s": 0.2})
    channel = MemoryChannel("memory")
    with running_http_server(port) as first:
        async with running_daemon(settings, [channel]) as daemon:
            await eventually(lambda: bool(daemon.mcp.tools()), timeout=30)
            fake_llm.push(Reply(tool_calls=[("web__add", {"a": 2, "b": 3})]), "it is 5")
            channel.inject("what is 2+3?", session="s")
            await channel.wait_for(1)
            assert channel.sent[-1].text == "it is 5"
            assert {"web__add", "web__echo"} <= offered(fake_llm.chat_requests[0])
            assert tool_results(fake_llm.chat_requests[1]) == ["5"]
            status = await daemon.snapshot()
            assert status["mcp"] == [
                {"name": "web", "transport": "http", "state": "up", "tools": 2, "last_error": ""}
            ]
            assert "web        up           2 tool(s)" in format_status(status)
            assert {c["name"]: c["kind"] for c in status["children"]}["mcp:web"] == "mcp"

            first.kill()
            first.wait()
            await eventually(lambda: not daemon.mcp.tools(), timeout=30)
            fake_llm.push("no adder now")
            channel.inject("and now?", session="s")
            await channel.wait_for(2)
            assert channel.sent[-1].text == "no adder now"
            assert not any(name.startswith("web__") for name in offered(fake_llm.requests[-1]))
            down = (await daemon.snapshot())["mcp"][0]
            assert down["state"] != "up" and down["tools"] == 0 and down["last_error"]
            assert "last error:" in format_status(await daemon.snapshot())

            with running_http_server(port):
                await eventually(lambda: bool(daemon.mcp.tools()), timeout=30)
                fake_llm.push(Reply(tool_calls=[("web__echo", {"text": "back"})]), "echoed")
                channel.inject("echo?", session="s")
                await channel.wait_for(3)
                assert tool_results(fake_llm.requests[-1])[-1] == "back"
                assert daemon.supervisor.children["mcp:web"].restarts >= 1


async def test_the_channel_policy_decides_who_sees_a_servers_tools(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    port, settings = with_web_server(
        tmp_path, fake_llm, tools={"policy": {"rules": [{"channel": "public", "deny": ["web__*"]}]}}
    )
    public, private = MemoryChannel("public"), MemoryChannel("private")
    with running_http_server(port):
        async with running_daemon(settings, [public, private]) as daemon:
            await eventually(lambda: bool(daemon.mcp.tools()), timeout=30)
            public.inject("hi", session="p")
            await public.wait_for(1)
            private.inject("hi", session="q")
            await private.wait_for(1)
    seen = [offered(request) for request in fake_llm.chat_requests]  # public asked first
    assert not any(name.startswith("web__") for name in seen[0])
    assert {"web__add", "web__echo"} <= seen[1]


async def test_a_server_that_never_starts_does_not_stop_the_daemon(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings = make_settings(
        tmp_path / "data",
        fake_llm.base_url,
        mcp={"servers": [{"name": "nope", "command": str(tmp_path / "missing")}]},
    )
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]) as daemon:
        channel.inject("hello", session="s")
        await channel.wait_for(1)
        await eventually(lambda: bool(daemon.mcp.servers["nope"].last_error))
        assert (await daemon.snapshot())["mcp"][0]["state"] == "down"
