"""Sub-agents: running the tasks `spawn` hands over, with caps, a timeout and a step cap.

A waiting sub-agent runs inside the parent's tool call (so cancelling the parent's turn
cancels it). A background one is a durable run like a cron firing: written to
`<data dir>/gateway/runs/` (store/pending_runs.py) and handed to the router as a run of
kind `subagent`, and removed once the router acknowledged it; after a crash
`ScheduledRuns.resume` hands it on again and the router's handled record keeps it from
being run twice (a finished sub-agent turn is reused, not redone). Its report is not sent
to the user directly: it becomes a second durable run, of kind `subagent_report`, in the
conversation's own session, so the conversation's agent answers the user from it and the
exchange lands in that session's history through a normal turn (history is written only
by turns). Both runs carry the root conversation's channel (`conversation_channel`), so
the restricted policy and the conversation's tools survive a restart; they share the
source id `<channel>:<id>`. Caps: `max_per_session` sub-agents of one conversation and
`max_running` in the daemon at once; beyond them `spawn` is refused with a log line, the
turn goes on.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog

from squidd.config.tools import SpawnSettings
from squidd.core.journal import turn_key
from squidd.core.models import Inbound, InboundKind, SessionId
from squidd.core.ports import Tool
from squidd.core.runs import PendingRun
from squidd.errors import LLMError, ToolError
from squidd.gateway.runtime import Runtime
from squidd.tools.spawn import (
    SUB_MARK,
    SpawnTool,
    root_of,
    subagent_channel,
)

log = structlog.get_logger()

Fire = Callable[[PendingRun], Awaitable[None]]
SubTools = Callable[[SessionId, str, str], list[Tool]]
"""The per-call tools of a sub-agent's turn: (its session, root channel, reply_to)."""

REPORT_NOTE = "(A sub-agent you started in the background finished; tell the user what it found.)"

HANDED_ON = "SUBAGENT_REPORT_HANDED_ON"
"""What a background sub-agent's own run answers once its report run is on disk: the
router delivers nothing for it (its `quiet_reply`)."""


class SubAgents:
    """Implements `squidd.tools.spawn.SubAgentRunner` for the daemon and `squidd chat`."""

    def __init__(self, runtime: Runtime, *, tools: SubTools, fire: Fire | None = None) -> None:
        self._runtime = runtime
        self._tools = tools  # decided with every other turn's, by `TurnTools.for_turn`
        self._settings: SpawnSettings = runtime.settings.tools.spawn
        self._fire = fire
        self._active: dict[str, str] = {}  # sub-agent session -> its parent session

    # --- tools -----------------------------------------------------------------------------
    def spawn_tools(self, session: SessionId, root_channel: str, reply_to: str) -> list[Tool]:
        """The spawn tool for a turn of `session`, or none where spawning is off."""
        settings = self._settings
        if not settings.enabled:
            return []
        if SUB_MARK in session and not settings.allow_nested:
            return []
        max_depth = settings.max_depth if settings.allow_nested else 1
        return [SpawnTool(self, session, root_channel, reply_to=reply_to, max_depth=max_depth)]

    # --- caps --------------------------------------------------------------------------------
    def _reserve(self, parent: SessionId) -> SessionId:
        settings = self._settings
        mine = sum(1 for p in self._active.values() if p == parent)
        if mine >= settings.max_per_session or len(self._active) >= settings.max_running:
            cap = "per session" if mine >= settings.max_per_session else "in the daemon"
            log.warning(
                "spawn_refused", session=parent, reason="cap", cap=cap, running=len(self._active)
            )
            raise ToolError(
                f"too many sub-agents running {cap}; wait for one to finish or do it yourself"
            )
        sub = SessionId(f"{parent}{SUB_MARK}{uuid.uuid4().hex[:10]}")
        self._active[sub] = parent
        return sub

    def running(self) -> int:
        return len(self._active)

    def snapshot(self) -> dict[str, Any]:
        """For `squidd status`: the sub-agents running per parent session, and the caps."""
        settings = self._settings
        per_session = Counter(self._active.values())
        return {
            "enabled": settings.enabled,
            "running": len(self._active),
            "per_session": dict(sorted(per_session.items())),
            "caps": {
                "max_per_session": settings.max_per_session,
                "max_running": settings.max_running,
                "max_depth": settings.max_depth if settings.allow_nested else 1,
                "timeout_s": settings.timeout_s,
                "max_tool_rounds": settings.max_tool_rounds,
            },
        }

    # --- running -----------------------------------------------------------------------------
    async def _run(
        self, sub: SessionId, root_channel: str, task: str, reply_to: str, turn_id: str | None
    ) -> str:
        settings = self._settings
        log.info("subagent_started", session=sub, channel=root_channel)
        with anyio.fail_after(settings.timeout_s):
            report = await self._runtime.agent.run(
                sub,
                task,
                subagent_channel(root_channel),
                extra_tools=self._tools(sub, root_channel, reply_to),
                turn_id=turn_id,
                max_tool_rounds=settings.max_tool_rounds,
                purpose="sub_agent",
            )
        log.info("subagent_finished", session=sub, chars=len(report))
        return report

    async def run_waiting(self, parent: SessionId, root_channel: str, task: str) -> str:
        sub = self._reserve(parent)
        try:
            return await self._run(sub, root_channel, task, "", None)
        except TimeoutError:
            log.warning("subagent_timed_out", session=sub, timeout_s=self._settings.timeout_s)
            raise ToolError(
                f"the sub-agent did not finish within {self._settings.timeout_s:g} s"
            ) from None
        finally:
            self._active.pop(sub, None)

    async def start_background(
        self, parent: SessionId, root_channel: str, task: str, reply_to: str
    ) -> str:
        if self._fire is None:
            raise ToolError("background sub-agents need the daemon (squidd run); use wait=true")
        sub = self._reserve(parent)
        run = PendingRun(
            kind=InboundKind.SUBAGENT,
            source_id=f"{root_channel}:{sub.rsplit(SUB_MARK, 1)[1]}",
            session_id=sub,
            text=task,
            target=reply_to,
            quiet_reply=HANDED_ON,
            conversation_channel=root_channel,
            agent=self._runtime.name,  # spawned within its parent's agent
        )
        try:
            await self._fire(run)
        except BaseException:
            self._active.pop(sub, None)
            raise
        log.info("subagent_queued", session=sub, parent=parent, to=reply_to)
        return sub

    async def run_background_turn(self, inbound: Inbound) -> str:
        """The router's turn for a background sub-agent: its report is handed on, durably, as
        a run of the conversation's session (see the module docstring)."""
        sub = inbound.session_id
        root_channel = inbound.turn_channel
        self._active.setdefault(sub, root_of(sub))  # a run resumed after a restart
        reply_to = "" if inbound.reply_to is None else str(inbound.reply_to)
        try:
            report = await self._run(
                sub,
                root_channel,
                inbound.text,
                reply_to,
                turn_key(inbound.channel, inbound.source_id),
            )
        except TimeoutError:
            log.warning("subagent_timed_out", session=sub, timeout_s=self._settings.timeout_s)
            report = f"(stopped: no report within {self._settings.timeout_s:g} s)"
        except LLMError as exc:
            # Said in the conversation, through its own turn, like any report: the router's
            # apology for this run would reach the user and never the parent's history.
            log.warning("subagent_failed", session=sub, error=type(exc).__name__)
            report = f"(failed: the language model could not answer: {exc})"
        except Exception as exc:
            log.exception("subagent_crashed", session=sub)
            report = f"(failed: an error on my side ({type(exc).__name__}); it is in my log)"
        finally:
            self._active.pop(sub, None)
        task = " ".join(inbound.text.split())
        task = task if len(task) <= 80 else task[:79] + "…"
        text = f"Sub-agent report ({task}):\n\n{report}"
        if inbound.quiet_reply != HANDED_ON or self._fire is None:
            return text  # a run queued by an older version: its report is the answer
        await self._fire(
            PendingRun(
                kind=InboundKind.SUBAGENT_REPORT,
                source_id=inbound.source_id,
                session_id=root_of(sub),
                text=f"{text}\n\n{REPORT_NOTE}",
                target=reply_to,
                conversation_channel=root_channel,
                agent=self._runtime.name,
            )
        )
        log.info("subagent_report_queued", session=sub, parent=root_of(sub))
        return HANDED_ON
