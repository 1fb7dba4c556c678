"""`cron_add`, `cron_list`, `cron_remove`: the agent schedules prompts for later.

Built per call with the session they serve and that session's reply address, so a job
created from a conversation delivers there unless the model names another target. The
checks and the words are the cron service's (core/cron_service.py), the same as in
`squidd cron` and on the dashboard.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from squidd.core.cron_service import CronJobs
from squidd.core.journal import Effect
from squidd.core.models import SessionId, ToolResult
from squidd.core.ports import Tool
from squidd.errors import StorageError, ToolError
from squidd.tools.arguments import Arguments
from squidd.tools.declared import Declared


@dataclass(frozen=True, slots=True)
class CronToolContext:
    """What the three tools share for one turn: the daemon's cron service, the session they
    serve and where its replies go."""

    jobs: CronJobs
    session_id: SessionId
    default_target: str
    agent: str = ""
    """The agent whose turn schedules it: the job is that agent's."""

    async def said(self, doing: Awaitable[str], what: str) -> str:
        """The service's words; its refusals and storage failures become ToolErrors."""
        try:
            return await doing
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        except StorageError as exc:
            raise ToolError(f"the job could not be {what}: {exc}") from exc


class CronAddArguments(Arguments):
    """An empty string stands for "not given": models often fill every field."""

    name: str = Field(description="Unique job name (letters, digits, -_.)")
    prompt: str = Field(description="What to do when the job runs.")
    cron: str | None = None
    every: str | None = None
    at: str | None = None
    timezone: str | None = Field(None, description="IANA timezone, e.g. Europe/Paris")
    target: str | None = None


class CronRemoveArguments(Arguments):
    name: Annotated[str, StringConstraints(min_length=1)]


class NoArguments(Arguments):
    pass


class CronAddTool(Declared[CronAddArguments], name="cron_add", effect=Effect.SIDE_EFFECT):
    description = (
        "Schedule a prompt to run later, once or repeatedly; the answer is delivered to this "
        "conversation unless 'target' names another ('matrix:!room:server', "
        "'email:someone@example.org'). Give exactly one of: 'cron' (5-field cron expression, "
        "e.g. '0 8 * * 1-5'), 'every' (interval like '30m', '2h', '1d') or 'at' (one ISO "
        "8601 time, e.g. '2026-12-24T18:00'). Times are in 'timezone' (IANA name)."
    )

    def __init__(self, context: CronToolContext) -> None:
        self._ctx = context

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        args = self.parse(arguments)
        added = self._ctx.jobs.add(
            args.name,
            args.prompt,
            cron=args.cron or None,
            every=args.every or None,
            at=args.at or None,
            timezone=args.timezone or None,
            target=args.target or self._ctx.default_target,
            created_by=self._ctx.session_id,
            agent=self._ctx.agent,
        )
        return ToolResult(await self._ctx.said(added, "saved"))


class CronListTool(Declared[NoArguments], name="cron_list", effect=Effect.READ_ONLY):
    description = "List the scheduled jobs: name, schedule, next run, target and prompt."

    def __init__(self, context: CronToolContext) -> None:
        self._ctx = context

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            return ToolResult(await self._ctx.jobs.listing())
        except StorageError as exc:
            raise ToolError(str(exc)) from exc


class CronRemoveTool(Declared[CronRemoveArguments], name="cron_remove", effect=Effect.IDEMPOTENT):
    description = "Remove a scheduled job by its name."

    def __init__(self, context: CronToolContext) -> None:
        self._ctx = context

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        name = self.parse(arguments).name
        return ToolResult(await self._ctx.said(self._ctx.jobs.remove(name), "removed"))


def cron_tools(context: CronToolContext) -> list[Tool]:
    return [CronAddTool(context), CronListTool(context), CronRemoveTool(context)]
