"""A streamable-HTTP MCP server written with the SDK, for the tests: `python http_server.py PORT`.

Serves `add(a, b)` and `echo(text)` on http://127.0.0.1:PORT/mcp. It runs as its own process
so a test can kill it mid-conversation and start it again on the same port.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("squidd-test-http")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
