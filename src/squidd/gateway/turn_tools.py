"""The per-turn tools of a session and where its scheduled replies go by default.

Per-call tools (memory_write, search_history, the cron tools, spawn) are bound to one session and
handed to `AgentLoop.run(..., extra_tools=...)`; the daemon and `squidd chat` build them here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from squidd.core.models import Inbound, SessionId
from squidd.core.ports import Tool
from squidd.gateway.runtime import Runtime
from squidd.store.cron_jobs import JobsFile
from squidd.tools.cron import CronToolContext, cron_tools

if TYPE_CHECKING:
    from squidd.gateway.subagents import SubAgents


def session_tools(
    runtime: Runtime,
    session: SessionId,
    *,
    default_target: str,
    jobs: JobsFile | None = None,
    on_cron_change: Callable[[], None] = lambda: None,
    subagents: SubAgents | None = None,
    channel: str = "",
) -> list[Tool]:
    """Every per-call tool of a turn: memory tools, the cron tools bound to `session`, and
    `spawn` when `subagents` is given (its sub-agents inherit `channel`'s restrictions).

    Call sites (channels, cron, heartbeat, the terminal) pass the result as `extra_tools`.
    """
    settings = runtime.settings
    tools = list(runtime.memory_tools(session))
    if settings.cron.enabled:
        context = CronToolContext(
            store=jobs or JobsFile(settings.storage.data_dir),
            session_id=session,
            default_target=default_target,
            default_timezone=settings.cron.default_timezone,
            on_change=on_cron_change,
        )
        tools.extend(cron_tools(context))
    if subagents is not None:
        tools.extend(subagents.spawn_tools(session, channel, default_target))
    return tools


def reply_address(inbound: Inbound) -> str:
    """Where a conversation's scheduled replies go by default: where its answers go."""
    destination = inbound.destination
    return str(destination) if destination is not None else ""
