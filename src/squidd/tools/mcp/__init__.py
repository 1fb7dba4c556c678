"""MCP tool sources: tools of external servers spoken to over the Model Context Protocol.

`connection` keeps one server connected (a supervised child), `tool` adapts its tools to
`core.ports.Tool` under `<server>__<tool>` names, `schema` checks and sanitises their input
schemas, `result` turns call results into capped text, and `hub` holds every server of the
config and answers "which tools are up now" for each turn.

`connection` imports the MCP SDK (about half a second of start-up and several MiB), so it
is loaded only when a server is configured or one of its names is asked for here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from squidd.tools.mcp.hub import McpHub

if TYPE_CHECKING:
    from squidd.tools.mcp.connection import McpServer, ServerState

__all__ = ["McpHub", "McpServer", "ServerState"]


def __getattr__(name: str) -> Any:
    if name in ("McpServer", "ServerState"):
        from squidd.tools.mcp import connection

        return getattr(connection, name)
    raise AttributeError(name)
