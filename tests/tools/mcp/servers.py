"""Helpers to run MCP servers for the tests: the hub's servers under a real supervisor, and
the SDK-written streamable-HTTP server as a child process on a free loopback port."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio

from squidd.config.mcp import McpSettings
from squidd.core.backoff import Backoff
from squidd.core.supervisor import Supervisor
from squidd.tools.mcp import McpHub

HERE = Path(__file__).parent
WAIT_S = 30.0  # a cap on waiting, never an assertion on speed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def time_server(name: str = "time") -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    }


def git_server(repo: Path, name: str = "git") -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-m", "mcp_server_git", "--repository", str(repo)],
    }


def bad_server(name: str = "bad", **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [str(HERE / "bad_server.py")], **extra}


def http_server(port: int, name: str = "web", **extra: Any) -> dict[str, Any]:
    return {"name": name, "transport": "http", "url": f"http://127.0.0.1:{port}/mcp", **extra}


@contextmanager
def running_http_server(
    port: int, script: str = "http_server.py"
) -> Iterator[subprocess.Popen[bytes]]:
    """The SDK-written HTTP server on `port` (`script`: http_server.py, or notes_server.py
    for the turn-journal tests), up (accepting) when the block starts."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / script), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_accepting(port, process)
        yield process
    finally:
        process.kill()
        process.wait()


def _wait_accepting(port: int, process: subprocess.Popen[bytes]) -> None:
    import time

    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the test HTTP MCP server exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        except OSError:
            time.sleep(0.05)
        else:
            return
    raise RuntimeError("the test HTTP MCP server did not start")


@asynccontextmanager
async def supervised_hub(
    *servers: dict[str, Any], **mcp: Any
) -> AsyncIterator[tuple[McpHub, Supervisor]]:
    """A hub over `servers`, each server a child of a supervisor with short delays."""
    settings = McpSettings(servers=list(servers), **{"ping_interval_s": 0.2, **mcp})
    hub = McpHub(settings)
    supervisor = Supervisor(Backoff(0.05, 0.3), healthy_after_s=1.0)
    async with anyio.create_task_group() as tg:
        for name, server in hub.servers.items():
            await tg.start(supervisor.supervise, f"mcp:{name}", server.run)
        yield hub, supervisor
        tg.cancel_scope.cancel()


async def wait_for(condition: Callable[[], bool], what: str) -> None:
    with anyio.fail_after(WAIT_S):
        while not condition():  # noqa: ASYNC110 - polls state another component owns
            await anyio.sleep(0.05)
