"""CronScheduler: the loop that fires due cron jobs and persists what happened.

A job's next fire time is persisted, so runs missed while the daemon was down are
recognised at start: run once if within the grace window, skipped with a log line
otherwise. The jobs come from a `JobStore` and time from a `Clock` (both ports), so tests
move time instead of waiting for it; firing hands the run to the router.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import anyio
import structlog
from anyio.abc import TaskStatus

from squidd.core.cron import CronJob, following_run
from squidd.core.ports import ChannelState, Clock, JobStore
from squidd.core.supervisor import ChildHealth
from squidd.errors import StorageError

log = structlog.get_logger()


def _next_run_key(job: CronJob) -> datetime:
    return job.next_run or datetime.max.replace(tzinfo=UTC)


FireFn = Callable[[CronJob, datetime], Awaitable[None]]


class CronScheduler:
    """Fires due jobs through `fire` (which queues the run in the router)."""

    def __init__(
        self,
        store: JobStore,
        fire: FireFn,
        *,
        clock: Clock,
        misfire_grace: timedelta,
        poll_s: float = 5.0,
    ) -> None:
        self._store = store
        self._fire = fire
        self._clock = clock
        self._grace = misfire_grace
        self._poll_s = poll_s
        self._wake = anyio.Event()
        self._jobs: list[CronJob] = []
        self._broken: str | None = None

    def notify_changed(self) -> None:
        """Look at the jobs again now (a tool just changed them)."""
        self._wake.set()

    def next_runs(self) -> list[dict[str, str | None]]:
        return [
            {
                "name": job.name,
                "schedule": job.describe(),
                "next_run": job.next_run.isoformat() if job.next_run else None,
                "target": job.target,
            }
            for job in sorted(self._jobs, key=_next_run_key)
        ]

    async def run(
        self, health: ChildHealth, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        seen_version: object = None
        while True:
            version = await self._store.version()
            if version != seen_version:
                await self._reload(health)
                seen_version = version
            if self._broken is None:
                await self.tick()
            due = min((j.next_run for j in self._jobs if j.next_run and not j.paused), default=None)
            if self._broken is None and due is not None and due <= self._clock.now():
                continue
            await self._sleep(due)

    async def _reload(self, health: ChildHealth) -> None:
        try:
            self._jobs = await self._store.load()
        except StorageError as exc:
            if self._broken != str(exc):
                log.error("cron_jobs_unreadable", reason=str(exc))  # noqa: TRY400 - expected; the reason is enough
            self._broken = str(exc)
            health.set(ChannelState.FAILED, f"jobs file unreadable, not touched: {exc}")
            return
        if self._broken is not None:
            log.info("cron_jobs_readable_again")
        self._broken = None
        health.set(ChannelState.CONNECTED, f"{len(self._jobs)} job(s)")

    async def _sleep(self, due: datetime | None) -> None:
        wake = self._wake = anyio.Event()

        async def until_due() -> None:
            if due is None:
                await anyio.sleep_forever()
            else:
                await self._clock.sleep_until(due)
            wake.set()

        with anyio.move_on_after(self._poll_s):
            async with anyio.create_task_group() as tg:
                tg.start_soon(until_due)
                await wake.wait()
                tg.cancel_scope.cancel()

    async def tick(self) -> None:
        """Fire (or skip, if missed for too long) every due job, and persist what happened."""
        now = self._clock.now()
        due = [
            j for j in self._jobs if j.next_run is not None and j.next_run <= now and not j.paused
        ]
        if not due:
            return
        outcomes: dict[str, tuple[datetime | None, datetime | None]] = {}
        parked: set[str] = set()
        for job in due:
            scheduled = job.next_run
            if scheduled is None:
                continue
            try:
                following = following_run(job, max(now, scheduled))
            except ValueError as exc:
                # E.g. a timezone this machine no longer knows: one bad job must not stop
                # the others (nor run again and again); it stays listed, without a next run.
                log.error("cron_job_invalid", job=job.name, reason=str(exc), effect="parked")  # noqa: TRY400 - expected; the reason is enough
                parked.add(job.name)
                continue
            late = now - scheduled
            last = job.last_run
            with structlog.contextvars.bound_contextvars(job=job.name):
                if late > self._grace:
                    log.warning(
                        "cron_run_missed",
                        job=job.name,
                        scheduled=scheduled.isoformat(),
                        late_s=int(late.total_seconds()),
                        reason="the daemon was not running; outside the grace window",
                    )
                else:
                    log.info("cron_run", job=job.name, scheduled=scheduled.isoformat())
                    await self._fire(job, scheduled)
                    last = now
            outcomes[job.name] = (following, last)

        def apply(jobs: list[CronJob]) -> list[CronJob]:
            result = []
            for job in jobs:
                if job.name in parked:
                    job = replace(job, next_run=None)
                elif job.name in outcomes:
                    nxt, last = outcomes[job.name]
                    if nxt is None:
                        log.info("cron_job_finished", job=job.name)
                        continue
                    job = replace(job, next_run=nxt, last_run=last)
                result.append(job)
            return result

        try:
            self._jobs = await self._store.modify(apply)
        except StorageError as exc:
            # Keep going from memory; the file is reported and left alone.
            log.error("cron_jobs_not_saved", reason=str(exc))  # noqa: TRY400 - expected; the reason is enough
            self._jobs = apply(self._jobs)
