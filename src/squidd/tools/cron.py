"""`cron_add`, `cron_list`, `cron_remove`: the agent schedules prompts for later.

Built per call with the session they serve and that session's reply address, so a job
created from a conversation delivers there unless the model names another target.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from squidd.core.cron import CronJob, JobListError, make_job, with_job, without_job
from squidd.core.journal import Effect
from squidd.core.models import SessionId, ToolResult
from squidd.core.ports import JobStore, Tool
from squidd.errors import StorageError, ToolError
from squidd.tools.arguments import Arguments
from squidd.tools.declared import Declared


@dataclass(frozen=True, slots=True)
class CronToolContext:
    """What the three tools share for one turn."""

    store: JobStore
    session_id: SessionId
    default_target: str
    default_timezone: str
    on_change: Callable[[], None] = lambda: None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    async def change(self, edit: Callable[[list[CronJob]], list[CronJob]], doing: str) -> None:
        """Apply `edit` to the job list and tell the scheduler; failures become ToolErrors."""
        try:
            await self.store.modify(edit)
        except JobListError as exc:
            raise ToolError(str(exc)) from None
        except StorageError as exc:
            raise ToolError(f"the job could not be {doing}: {exc}") from exc
        self.on_change()


def format_job(job: CronJob) -> str:
    nxt = job.next_run.isoformat(timespec="minutes") if job.next_run else "-"
    target = job.target or "(history only)"
    return f"{job.name}: {job.describe()}; next {nxt}; to {target}; prompt: {job.prompt}"


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
        try:
            job = make_job(
                args.name,
                args.prompt,
                cron=args.cron or None,
                every=args.every or None,
                at=args.at or None,
                timezone=args.timezone or self._ctx.default_timezone,
                target=args.target or self._ctx.default_target,
                created_by=self._ctx.session_id,
                now=self._ctx.clock(),
            )
        except ValueError as exc:
            raise ToolError(str(exc)) from None

        await self._ctx.change(functools.partial(with_job, job=job), "saved")
        return ToolResult(f"Scheduled. {format_job(job)}")


class CronListTool(Declared[NoArguments], name="cron_list", effect=Effect.READ_ONLY):
    description = "List the scheduled jobs: name, schedule, next run, target and prompt."

    def __init__(self, context: CronToolContext) -> None:
        self._ctx = context

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            jobs = await self._ctx.store.load()
        except StorageError as exc:
            raise ToolError(str(exc)) from exc
        if not jobs:
            return ToolResult("No scheduled jobs.")
        return ToolResult("\n".join(format_job(job) for job in jobs))


class CronRemoveTool(Declared[CronRemoveArguments], name="cron_remove", effect=Effect.IDEMPOTENT):
    description = "Remove a scheduled job by its name."

    def __init__(self, context: CronToolContext) -> None:
        self._ctx = context

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        name = self.parse(arguments).name

        await self._ctx.change(functools.partial(without_job, name=name), "removed")
        return ToolResult(f"Removed job {name!r}.")


def cron_tools(context: CronToolContext) -> list[Tool]:
    return [CronAddTool(context), CronListTool(context), CronRemoveTool(context)]
