"""The cron jobs as one service: list, add, pause, resume, remove and run now, for the
agent's cron tools, `squidd cron` and the dashboard alike, with the same checks and the
same words to the person.

Every change is one read-modify-write of the `JobStore`, then `changed()`: in the daemon
its scheduler looks at the jobs again at once; from the command line the running daemon is
told through its status socket. "Run now" hands the job to `run_now` (in the daemon, its
durable cron run; from the command line, a request to the running daemon) and leaves the
job's schedule as it is. A bad name, a taken name or a bad schedule raises `ValueError`
(`JobListError` for the job list) with the reason in words; a jobs file that cannot be read
or written raises `StorageError`. Nothing here knows who asked.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime

from squidd.core.cron import CronJob, JobListError, NoSuchJob, make_job, with_job, without_job
from squidd.core.models import utcnow
from squidd.core.ports import JobStore

CheckTarget = Callable[[str], Awaitable[str]]
"""A job's target checked when it is added: the target to keep (an alias or a person
resolved to a room), or `ValueError` saying why it cannot be reached."""

RunNow = Callable[[CronJob, datetime], Awaitable[None]]
"""Fires one run of the job now (its time, the `datetime`, makes the run's id)."""

NOT_RUNNING = (
    "the daemon is not running, so no job can run now; start it with `squidd run` "
    "(the job keeps its schedule)"
)


def _nothing() -> None:
    return None


def format_job(job: CronJob) -> str:
    """One job in one line: name, schedule, next run, target, prompt."""
    nxt = job.next_run.isoformat(timespec="minutes") if job.next_run else "-"
    target = job.target or "(history only)"
    state = "; paused" if job.paused else ""
    agent = f" [agent {job.agent}]" if job.agent else ""
    return (
        f"{job.name}{agent}: {job.describe()}{state}; next {nxt}; to {target}; prompt: {job.prompt}"
    )


def _paused(jobs: list[CronJob], name: str, paused: bool) -> list[CronJob]:
    if not any(job.name == name for job in jobs):
        raise NoSuchJob(f"no job named {name!r}")
    return [replace(job, paused=paused) if job.name == name else job for job in jobs]


class CronJobs:
    """The one way the cron jobs are listed and changed (see the module docstring)."""

    def __init__(
        self,
        store: JobStore,
        *,
        default_timezone: str,
        run_now: RunNow | None = None,
        changed: Callable[[], None] = _nothing,
        clock: Callable[[], datetime] = utcnow,
        check_target: CheckTarget | None = None,
    ) -> None:
        self._store = store
        self._check_target = check_target
        self._timezone = default_timezone
        self._run_now = run_now
        self._changed = changed
        self._clock = clock

    async def jobs(self) -> list[CronJob]:
        """Every job, as stored (with its next run)."""
        return await self._store.load()

    async def listing(self) -> str:
        jobs = await self.jobs()
        if not jobs:
            return "No scheduled jobs."
        return "\n".join(format_job(job) for job in jobs)

    async def add(
        self,
        name: str,
        prompt: str,
        *,
        cron: str | None = None,
        every: str | None = None,
        at: str | None = None,
        timezone: str | None = None,
        target: str = "",
        created_by: str = "",
        agent: str = "",
    ) -> str:
        if target and self._check_target is not None:
            target = await self._check_target(target)
        job = make_job(
            name,
            prompt,
            cron=cron,
            every=every,
            at=at,
            timezone=timezone or self._timezone,
            target=target,
            created_by=created_by,
            now=self._clock(),
            agent=agent,
        )
        await self._change(functools.partial(with_job, job=job))
        return f"Scheduled. {format_job(job)}"

    async def remove(self, name: str) -> str:
        await self._change(functools.partial(without_job, name=name))
        return f"Removed job {name!r}."

    async def pause(self, name: str) -> str:
        await self._change(functools.partial(_paused, name=name, paused=True))
        return f"Paused job {name!r}; it keeps its schedule."

    async def resume(self, name: str) -> str:
        jobs = await self._change(functools.partial(_paused, name=name, paused=False))
        job = next(job for job in jobs if job.name == name)
        return f"Resumed job {name!r}; {format_job(job)}"

    async def run_now(self, name: str) -> str:
        """One run of the job now; its schedule is left as it is."""
        found = [job for job in await self.jobs() if job.name == name]
        if not found:
            raise NoSuchJob(f"no job named {name!r}")
        if self._run_now is None:
            raise JobListError(NOT_RUNNING)
        await self._run_now(found[0], self._clock())
        return f"Job {name!r} runs now; its schedule is unchanged."

    async def _change(self, edit: Callable[[list[CronJob]], list[CronJob]]) -> list[CronJob]:
        jobs = await self._store.modify(edit)
        self._changed()
        return jobs
