"""Bad input from an MCP server: garbage on stdout, a `$ref` cycle, a 20 MB result. Each is
a clear log line and a usable connection, never a crash or a hang."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from tests.tools.mcp.servers import bad_server, supervised_hub, wait_for

pytestmark = pytest.mark.anyio


async def test_garbage_on_stdout_is_logged_and_the_server_still_works() -> None:
    with capture_logs() as logs:
        async with supervised_hub(bad_server()) as (hub, _):
            tools = {tool.name: tool for tool in hub.tools()}
            assert (await tools["bad__ping"].execute({})).content == "pong"
    bad = [e for e in logs if e["event"] == "mcp_server_bad_output"]
    assert bad and bad[0]["server"] == "bad"
    assert "this is not JSON-RPC" not in str(bad)  # the line itself is not echoed into the log


async def test_a_schema_with_a_ref_cycle_drops_that_tool_only() -> None:
    with capture_logs() as logs:
        async with supervised_hub(bad_server()) as (hub, _):
            names = sorted(tool.name for tool in hub.tools())
    assert names == [
        "bad__broken",
        "bad__die",
        "bad__huge",
        "bad__odd",
        "bad__ping",
        "bad__slow",
    ]
    dropped = [e for e in logs if e["event"] == "mcp_tool_dropped"]
    assert dropped == [
        {
            "event": "mcp_tool_dropped",
            "log_level": "warning",
            "server": "bad",
            "tool": "cyclic",
            "reason": "$ref cycle through '#/$defs/node'",
        }
    ]


async def test_a_20_mb_result_is_capped_and_says_so() -> None:
    async with supervised_hub(bad_server(max_result_chars=10_000)) as (hub, _):
        tools = {tool.name: tool for tool in hub.tools()}
        result = await tools["bad__huge"].execute({})
        assert not result.is_error
        assert len(result.content) < 10_200
        assert result.content.startswith("x" * 10_000)
        assert "20971520 characters, 10000 shown" in result.content
        # and the connection is still usable after it
        assert (await tools["bad__ping"].execute({})).content == "pong"


async def test_a_call_that_never_answers_times_out_as_a_tool_error() -> None:
    with capture_logs() as logs:
        async with supervised_hub(bad_server(timeout_s=0.5)) as (hub, _):
            tools = {tool.name: tool for tool in hub.tools()}
            result = await tools["bad__slow"].execute({})
            assert result.is_error and "did not answer within 0.5s" in result.content
            assert (await tools["bad__ping"].execute({})).content == "pong"
    assert any(e["event"] == "mcp_call_timeout" for e in logs)


async def test_cancelling_the_turn_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    seen = tmp_path / "cancelled.jsonl"
    async with supervised_hub(bad_server(env={"BAD_SERVER_LOG": str(seen)})) as (hub, _):
        tools = {tool.name: tool for tool in hub.tools()}
        async with anyio.create_task_group() as turn:
            turn.start_soon(tools["bad__slow"].execute, {})
            await anyio.sleep(0.3)  # the call is on its way; then the turn is cancelled
            turn.cancel_scope.cancel()
        await wait_for(seen.exists, "the server to hear of the cancellation")
        assert "requestId" in seen.read_text()
        assert (await tools["bad__ping"].execute({})).content == "pong"


async def test_garbage_lines_give_squidds_line_not_a_traceback_each() -> None:
    import io
    import logging

    import structlog

    from squidd.log import configure_logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    out = io.StringIO()
    try:
        configure_logging("info", "json", stream=out)
        async with supervised_hub(bad_server()) as (hub, _):
            tools = {tool.name: tool for tool in hub.tools()}
            assert (await tools["bad__ping"].execute({})).content == "pong"
    finally:
        structlog.reset_defaults()
        root.handlers[:] = handlers
        root.setLevel(level)
    text = out.getvalue()
    assert '"event": "mcp_server_bad_output"' in text
    assert "Traceback" not in text and "Failed to parse JSONRPC" not in text


async def test_a_stdio_server_that_exits_loses_its_tools_until_restarted() -> None:
    # no pings (an hour apart): the end of the server's stdout alone must take the tools away
    async with supervised_hub(bad_server(), ping_interval_s=3600) as (hub, supervisor):
        server = hub.servers["bad"]
        tools = {tool.name: tool for tool in hub.tools()}
        died = await tools["bad__die"].execute({})
        assert died.is_error
        await wait_for(lambda: supervisor.children["mcp:bad"].restarts >= 1, "a restart")
        await wait_for(lambda: bool(hub.tools()), "the tools to come back")
        assert server.last_error == ""
        again = {tool.name: tool for tool in hub.tools()}
        assert (await again["bad__ping"].execute({})).content == "pong"
