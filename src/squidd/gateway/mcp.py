"""MCP servers for the commands that run without the daemon (`squidd chat`, `squidd mcp`).

They connect to the configured servers themselves: each server runs under a supervisor of
their own with the gateway's restart backoff (a server lost during a chat comes back), and
the caller gets the hub once every server connected or failed its first attempt, waiting at
most `mcp.connect_timeout_s`.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO

import anyio
import structlog

from squidd.config import Settings
from squidd.core.backoff import Backoff
from squidd.core.supervisor import Supervisor
from squidd.tools.mcp import McpHub

log = structlog.get_logger()

__all__ = ["connected_mcp"]


@asynccontextmanager
async def connected_mcp(
    settings: Settings, *, errlog: TextIO = sys.stderr, only: str | None = None
) -> AsyncIterator[McpHub]:
    """The configured servers (or just `only`), connected as far as they would within
    `mcp.connect_timeout_s`; they are stopped when the block ends."""
    mcp = settings.mcp
    if only is not None:
        mcp = mcp.model_copy(update={"servers": [s for s in mcp.servers if s.name == only]})
    hub = McpHub(mcp, errlog=errlog)
    gw = settings.gateway
    supervisor = Supervisor(
        Backoff(gw.restart_initial_delay_s, gw.restart_max_delay_s),
        healthy_after_s=gw.healthy_after_s,
    )
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        for name, server in hub.servers.items():
            tg.start_soon(supervisor.supervise, f"mcp:{name}", server.run)
        down = await hub.wait_connected()
        if down:
            log.warning("mcp_servers_not_connected", servers=down)
        try:
            yield hub
        except Exception as exc:  # noqa: BLE001 - re-raised below as it is
            # Raised past the task group it would arrive wrapped in an ExceptionGroup, and
            # the caller's `except LLMError` would miss it.
            failure = exc
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
