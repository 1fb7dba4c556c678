"""Every configured MCP server, and the tools of those that are up right now.

The hub is built once from `[mcp]`; the daemon runs each server's `run` as its own
supervised child, and `squidd chat` / `squidd mcp` run them in a task group of their own.
`tools()` is asked once per turn and the result passed as `extra_tools`, so a server's tools
appear and disappear with its connection without the fixed `ToolRegistry` ever changing.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from squidd.config.mcp import McpSettings
from squidd.core.ports import Tool

if TYPE_CHECKING:
    from squidd.tools.mcp.connection import McpServer

__all__ = ["McpHub"]


class McpHub:
    def __init__(self, settings: McpSettings, *, errlog: TextIO = sys.stderr) -> None:
        self._settings = settings
        self.servers: dict[str, McpServer] = {}
        enabled = settings.enabled_servers()
        if not enabled:
            return  # the MCP SDK is never imported by a daemon without servers
        from squidd.tools.mcp.connection import McpServer

        self.servers = {
            server.name: McpServer(
                server,
                connect_timeout_s=settings.connect_timeout_s,
                ping_interval_s=settings.ping_interval_s,
                errlog=errlog,
            )
            for server in enabled
        }

    def tools(self) -> list[Tool]:
        """The tools of every server that is up now, for one turn."""
        return [tool for server in self.servers.values() for tool in server.tools()]

    def snapshot(self) -> list[dict[str, Any]]:
        return [server.snapshot() for server in self.servers.values()]

    async def wait_connected(self, timeout_s: float | None = None) -> list[str]:
        """Wait until each server connected or failed its first attempt, at most `timeout_s`;
        return the names of those not connected."""
        limit = self._settings.connect_timeout_s if timeout_s is None else timeout_s
        with anyio.move_on_after(limit):
            for server in self.servers.values():
                await server.settled.wait()
        return [name for name, server in self.servers.items() if not server.connected.is_set()]
