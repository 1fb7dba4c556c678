"""Bad input from an MCP server: garbage on stdout, a `$ref` cycle, a 20 MB result. Each is
a clear log line and a usable connection, never a crash or a hang."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from tests.tools.mcp.servers import bad_server, supervised_hub

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
    assert names == ["bad__huge", "bad__ping"]
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
