"""MCP tool-call overhead through squidd versus calling the SDK directly.

Both sides call the same tool of the same server (the SDK-written test server over stdio
by default, or mcp-server-time) the same number of times: once through `ClientSession.
call_tool` on a session of our own, once through squidd's `McpTool.execute` (the hub's
supervised connection, the stream pump, the timeout, the result rendering and cap). It
prints the median and p90 of each and the ratio of the medians.

    python bench/bench_mcp_call.py [--calls 500] [--server echo|time]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from squidd.config.mcp import McpSettings
from squidd.core.backoff import Backoff
from squidd.core.supervisor import Supervisor
from squidd.tools.mcp import McpHub

ECHO_SERVER = """
import sys
from mcp.server.mcpserver import MCPServer
server = MCPServer("bench")
@server.tool()
def echo(text: str) -> str:
    '''Return the text.'''
    return text
server.run("stdio")
"""


def server_args(kind: str) -> tuple[list[str], str, dict[str, Any]]:
    if kind == "time":
        return (
            ["-m", "mcp_server_time", "--local-timezone", "UTC"],
            "get_current_time",
            {"timezone": "UTC"},
        )
    return ["-c", ECHO_SERVER], "echo", {"text": "hello " * 20}


async def timed(calls: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    for _ in range(20):  # warm-up
        await call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def direct(calls: int, kind: str, quiet: TextIO) -> list[float]:
    args, tool, arguments = server_args(kind)
    params = StdioServerParameters(command=sys.executable, args=args)
    async with (
        stdio_client(params, quiet) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()
        return await timed(calls, lambda: session.call_tool(tool, arguments))


async def through_squidd(calls: int, kind: str, quiet: TextIO) -> list[float]:
    args, tool, arguments = server_args(kind)
    settings = McpSettings(servers=[{"name": "b", "command": sys.executable, "args": args}])
    hub = McpHub(settings, errlog=quiet)
    supervisor = Supervisor(Backoff(1, 5), healthy_after_s=60)
    async with anyio.create_task_group() as tg:
        await tg.start(supervisor.supervise, "mcp:b", hub.servers["b"].run)
        adapter = {t.name: t for t in hub.tools()}[f"b__{tool}"]
        samples = await timed(calls, lambda: adapter.execute(arguments))
        tg.cancel_scope.cancel()
    return samples


def describe(label: str, samples: list[float]) -> float:
    median = statistics.median(samples)
    p90 = statistics.quantiles(samples, n=10)[-1]
    print(f"  {label:<16} median {median:7.3f} ms   p90 {p90:7.3f} ms   ({len(samples)} calls)")
    return median


async def main(calls: int, kind: str, quiet: TextIO) -> None:
    print(f"MCP tool call over stdio ({kind} server), {calls} calls each:")
    sdk = describe("SDK directly", await direct(calls, kind, quiet))
    ours = describe("through squidd", await through_squidd(calls, kind, quiet))
    print(f"  overhead ratio (squidd / SDK, medians): {ours / sdk:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--server", choices=["echo", "time"], default="echo")
    options = parser.parse_args()
    with Path(os.devnull).open("w") as devnull:  # the servers' stderr, kept off the figures
        anyio.run(main, options.calls, options.server, devnull)
