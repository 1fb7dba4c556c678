"""`squidd mcp list` and `squidd mcp call SERVER TOOL JSON`: debug MCP servers from a terminal.

Both connect to the configured servers themselves (no daemon needed), the same way the
daemon does, and wait at most `mcp.connect_timeout_s`. `list` prints each server's state,
last error and the tools it offers under their namespaced names; `call` runs one tool with
JSON arguments and prints the result as the model would see it (capped, summarized).
Exit codes: 0 ok; 1 a server is not connected or the tool reported an error; 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from squidd.commands import Commands
from squidd.config import Settings
from squidd.errors import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK

if TYPE_CHECKING:
    from squidd.tools.mcp import McpHub

__all__ = ["mcp_command", "register"]


def register(commands: Commands) -> None:
    mcp = commands.add(
        "mcp", help="inspect and call MCP servers (no daemon needed)", example="squidd mcp list"
    )
    actions = commands.actions(mcp, "mcp_command")
    actions.add(
        "list",
        help="connect to each server; print its state and tools",
        run=_run,
        example="squidd mcp list",
    )
    call = actions.add(
        "call",
        help="call one tool of one server",
        run=_run,
        example='squidd mcp call files read_file \'{"path": "notes.md"}\'',
    )
    call.add_argument("server")
    call.add_argument("tool", help="the tool's own name (or <server>__<tool>)")
    call.add_argument("arguments", nargs="?", default="{}", help="a JSON object")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    return mcp_command(
        settings,
        args.mcp_command,
        server=getattr(args, "server", None),
        tool=getattr(args, "tool", None),
        arguments=getattr(args, "arguments", None),
    )


def format_servers(hub: McpHub) -> str:
    lines: list[str] = []
    for name, server in hub.servers.items():
        info = server.snapshot()
        error = f" - {info['last_error']}" if info["last_error"] else ""
        head = f"{name} ({info['transport']}): {info['state']}, {info['tools']} tool(s)"
        lines.append(head + error)
        for tool in server.tools():
            summary = " ".join(tool.description.split())
            if len(summary) > 100:
                summary = summary[:97] + "..."
            lines.append(f"  {tool.name}  {summary}")
    return "\n".join(lines) if lines else "no MCP servers configured ([[mcp.servers]])"


async def _list(settings: Settings, out: TextIO) -> int:
    from squidd.gateway.mcp import connected_mcp  # the MCP client: this command's, not run's

    async with connected_mcp(settings) as hub:
        out.write(format_servers(hub) + "\n")
        down = [name for name, server in hub.servers.items() if not server.tools()]
    return EXIT_FAILURE if down else EXIT_OK


async def _call(
    settings: Settings, server: str, tool: str, arguments: dict[str, Any], out: TextIO
) -> int:
    from squidd.gateway.mcp import connected_mcp

    async with connected_mcp(settings, only=server) as hub:
        connection = hub.servers[server]
        wanted = f"{server}__{tool}" if not tool.startswith(f"{server}__") else tool
        found = {t.name: t for t in connection.tools()}
        if wanted not in found:
            if not connection.tools():
                reason = connection.last_error
                print(f"squidd: {server} is not connected: {reason}", file=sys.stderr)
            else:
                known = ", ".join(sorted(found))
                print(f"squidd: {server} offers no tool {tool!r}; it has: {known}", file=sys.stderr)
            return EXIT_FAILURE
        result = await found[wanted].execute(arguments)
        out.write(result.content + "\n")
        return EXIT_FAILURE if result.is_error else EXIT_OK


def mcp_command(
    settings: Settings,
    action: str,
    *,
    server: str | None = None,
    tool: str | None = None,
    arguments: str | None = None,
) -> int:
    if action == "list":
        return anyio.run(_list, settings, sys.stdout)
    if server is None or tool is None:
        raise ValueError("`squidd mcp call` needs a server and a tool")
    if server not in {s.name for s in settings.mcp.servers}:
        print(f"squidd: no MCP server named {server!r} in the config", file=sys.stderr)
        return EXIT_CONFIG
    try:
        decoded = json.loads(arguments or "{}")
    except ValueError as exc:
        print(f"squidd: the arguments are not JSON: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if not isinstance(decoded, dict):
        print("squidd: the arguments must be a JSON object", file=sys.stderr)
        return EXIT_CONFIG
    return anyio.run(_call, settings, server, tool, decoded, sys.stdout)
