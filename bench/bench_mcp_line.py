"""Reading one huge MCP answer over stdio: the SDK's stdio transport versus squidd's reader.

A real server process (the SDK's `MCPServer`) answers one tool call with a result of N
characters, which it writes as one JSON-RPC line. The same call is timed through the SDK's
`stdio_client` with a `ClientSession` of our own, and through squidd's `McpTool` (the
hub's connection over `squidd.tools.mcp.stdio`). Doubling N doubles a linear reader's time
and quadruples a quadratic one's: the last column is time(N) / time(N/2).

    python bench/bench_mcp_line.py [--sizes 5 10 20 40]   # MB
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TextIO

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from squidd.config.mcp import McpSettings
from squidd.core.backoff import Backoff
from squidd.core.supervisor import Supervisor
from squidd.tools.mcp import McpHub

BLOB_SERVER = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("bench")
@server.tool()
def blob(size: int) -> str:
    '''Return `size` characters.'''
    return "x" * size
server.run("stdio")
"""
LIMIT = 1024 * 1024 * 1024  # squidd's largest max_message_bytes: nothing is refused here


async def sdk_seconds(size: int, quiet: TextIO) -> float:
    params = StdioServerParameters(command=sys.executable, args=["-c", BLOB_SERVER])
    async with (
        stdio_client(params, quiet) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        started = time.perf_counter()
        await session.call_tool("blob", {"size": size})
        return time.perf_counter() - started


async def squidd_seconds(size: int, quiet: TextIO) -> float:
    server = {
        "name": "b",
        "command": sys.executable,
        "args": ["-c", BLOB_SERVER],
        "timeout_s": 3600,
        "max_message_bytes": LIMIT,
    }
    hub = McpHub(McpSettings(servers=[server]), errlog=quiet)
    supervisor = Supervisor(Backoff(1, 5), healthy_after_s=60)
    async with anyio.create_task_group() as tg:
        await tg.start(supervisor.supervise, "mcp:b", hub.servers["b"].run)
        tool = {t.name: t for t in hub.tools()}["b__blob"]
        started = time.perf_counter()
        await tool.execute({"size": size})
        elapsed = time.perf_counter() - started
        tg.cancel_scope.cancel()
    return elapsed


async def main(sizes: list[int], quiet: TextIO) -> None:
    print("one MCP answer of N MB in one line, read over stdio (seconds; ratio to N/2)")
    previous: dict[str, float] = {}
    for mb in sizes:
        size = mb * 1024 * 1024
        for label, measure in (("SDK stdio_client", sdk_seconds), ("squidd", squidd_seconds)):
            seconds = await measure(size, quiet)
            ratio = f"{seconds / previous[label]:.2f}" if label in previous else "-"
            previous[label] = seconds
            print(f"  {mb:4d} MB  {label:<17} {seconds:8.2f} s   x{ratio}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 10, 20, 40])
    options = parser.parse_args()
    with Path(os.devnull).open("w") as devnull:  # the servers' stderr, kept off the figures
        anyio.run(main, options.sizes, devnull)
