"""The per-turn tools of a session and where its scheduled replies go by default.

Per-call tools (memory_write, search_history, the cron tools, spawn, send_file) are bound to
one session (send_file to one turn's reply) and handed to `AgentLoop.run(..., extra_tools=...)`;
the daemon and `squidd chat` build them here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from squidd.core.models import Inbound, SessionId
from squidd.core.ports import Tool
from squidd.core.reply_files import ReplyFiles
from squidd.gateway.runtime import Runtime
from squidd.store.cron_jobs import JobsFile
from squidd.tools.cron import CronToolContext, cron_tools
from squidd.tools.send_file import SendFileTool

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
    reply_files: ReplyFiles | None = None,
) -> list[Tool]:
    """Every per-call tool of a turn: memory tools, the cron tools bound to `session`,
    `spawn` when `subagents` is given (its sub-agents inherit `channel`'s restrictions) and
    `send_file` when the turn's reply can carry files (`reply_files`).

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
    if reply_files is not None:
        media_dir = settings.storage.data_dir / "media"
        max_bytes = settings.media.max_send_bytes
        tools.append(
            SendFileTool(settings.workspace_dir, media_dir, reply_files, max_bytes=max_bytes)
        )
    return tools


def reply_address(inbound: Inbound) -> str:
    """Where a conversation's scheduled replies go by default: where its answers go."""
    destination = inbound.destination
    return str(destination) if destination is not None else ""
