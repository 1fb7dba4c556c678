"""A streamable-HTTP MCP server written with the SDK, for the turn-journal fault tests:
`python notes_server.py PORT` serves on http://127.0.0.1:PORT/mcp, in its own process so it
outlives a squidd that is killed.

`put_note` (annotated `idempotentHint`) and `add_note` (no annotation: a side effect) write
`text` to `path` and count their runs in `path.runs`; the first run then waits `wait`
seconds, so a test can kill squidd while the call runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("squidd-test-notes")


async def _note(path: str, text: str, wait: float) -> str:
    runs = Path(f"{path}.runs")
    first = not runs.exists()
    Path(path).write_text(text)
    with runs.open("a") as out:
        out.write("run\n")
    if first:
        await anyio.sleep(wait)
    return f"wrote {text}"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
async def put_note(path: str, text: str, wait: float = 0) -> str:
    """Write the note (the same text twice leaves the same file)."""
    return await _note(path, text, wait)


@server.tool()
async def add_note(path: str, text: str, wait: float = 0) -> str:
    """Write the note; says nothing about running twice."""
    return await _note(path, text, wait)


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
