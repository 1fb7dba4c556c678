"""MCP tool sources: tools of external servers spoken to over the Model Context Protocol.

`connection` keeps one server connected (a supervised child), `tool` adapts its tools to
`core.ports.Tool` under `<server>__<tool>` names, `schema` checks and sanitises their input
schemas, `result` turns call results into capped text, and `hub` holds every server of the
config and answers "which tools are up now" for each turn.
"""

from squidd.tools.mcp.connection import McpServer, ServerState
from squidd.tools.mcp.hub import McpHub

__all__ = ["McpHub", "McpServer", "ServerState"]
