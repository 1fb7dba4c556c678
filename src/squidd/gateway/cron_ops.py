"""The cron service across the status socket: the daemon's two requests and the command
line's side of them.

`squidd cron` changes the jobs file itself, then tells the running daemon (`cron.changed`:
its scheduler looks at the jobs again at once, so a job removed or paused there is not
fired from the scheduler's older list); "run now" goes through the daemon (`cron.run`),
which fires the job as the scheduler would. No daemon answering: a change waits for the
next start (nothing to tell), a run now is refused with the reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

from squidd.config import Settings
from squidd.core.cron import CronJob, JobListError
from squidd.core.cron_service import NOT_RUNNING, CronJobs
from squidd.core.ports import ControlOp, JobStore
from squidd.core.scheduler import CronScheduler
from squidd.gateway.cron_targets import command_line_check
from squidd.gateway.status import ask, socket_path

CHANGED = "cron.changed"
RUN = "cron.run"


def cron_ops(service: CronJobs, scheduler: CronScheduler | None) -> dict[str, ControlOp]:
    """The requests the daemon answers for `squidd cron`."""

    async def changed(request: Mapping[str, Any]) -> dict[str, Any]:
        if scheduler is not None:
            scheduler.notify_changed()
        return {"ok": True}

    async def run(request: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return {"said": await service.run_now(str(request.get("name", "")))}
        except ValueError as exc:
            return {"error": str(exc)}

    return {CHANGED: changed, RUN: run}


def command_line_cron(settings: Settings, store: JobStore) -> CronJobs:
    """The cron service of `squidd cron`: the jobs file, the running daemon told of each
    change, and a run now asked of it."""
    path = socket_path(settings)

    def changed() -> None:
        # No daemon answering: it reads the jobs when it starts.
        with contextlib.suppress(OSError, ValueError, TypeError):
            ask(path, {"op": CHANGED}, timeout_s=2.0)

    async def run_now(job: CronJob, when: datetime) -> None:
        try:
            answer = await anyio.to_thread.run_sync(_ask, path, {"op": RUN, "name": job.name})
        except OSError:
            raise JobListError(NOT_RUNNING) from None
        if "error" in answer:
            raise JobListError(str(answer["error"]))

    return CronJobs(
        store,
        default_timezone=settings.cron.default_timezone,
        run_now=run_now,
        changed=changed,
        check_target=command_line_check(settings),
    )


def _ask(path: Path, request: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return ask(path, request)
    except (ValueError, TypeError) as exc:
        return {"error": f"the daemon's answer could not be read: {exc}"}
