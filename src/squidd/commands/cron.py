"""`squidd cron list|add|remove|pause|resume|run`: the cron jobs from the command line.

Through the one cron service (core/cron_service.py: the same checks and words as the
agent's cron tools and the dashboard). A change is made in the jobs file and the running
daemon is told at once (gateway/cron_ops.py); without a daemon it reads them when it
starts. `run` asks the running daemon to fire the job now. A jobs file that cannot be read
is reported and left as it is.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable

import anyio

from squidd import __version__
from squidd.commands import Commands
from squidd.config import Settings
from squidd.core.cron import JobListError
from squidd.core.cron_service import CronJobs, format_job
from squidd.errors import StorageError
from squidd.gateway.cron_ops import command_line_cron
from squidd.store.cron_deliveries import CronDeliveries, delivery_note
from squidd.store.cron_jobs import JobsFile
from squidd.store.format import DataDirTooNewError, refuse_newer

Action = Callable[[CronJobs, argparse.Namespace], Awaitable[str]]


def register(commands: Commands) -> None:
    cron = commands.add(
        "cron",
        help="manage scheduled prompts",
        example="squidd cron list\nsquidd cron add --name news --every 1h --prompt 'the news'",
    )
    actions = commands.actions(cron, "cron_command")
    actions.add(
        "list",
        help="list jobs, each with its next run and its last delivery",
        run=_on_jobs(_list),
        example="squidd cron list",
    )
    add = actions.add(
        "add",
        help="add a job; its target is checked before it is kept",
        run=_on_jobs(_add),
        example="squidd cron add --name morning --cron '0 8 * * mon-fri' --prompt 'my day' "
        "--target matrix:@me:example.org",
    )
    add.add_argument("--name", required=True)
    add.add_argument("--prompt", required=True)
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="a cron expression, e.g. '0 8 * * mon-fri'")
    when.add_argument("--every", help="an interval, e.g. 30m, 2h, 1d")
    when.add_argument("--at", help="one time, ISO 8601, e.g. 2026-12-24T18:00")
    add.add_argument("--timezone", default=None, help="IANA timezone (default from config)")
    add.add_argument("--target", default="", help="where to deliver, e.g. email:me@x.org")
    add.add_argument(
        "--agent", default="", help="the agent whose job it is (default: the default agent)"
    )
    for name, run, text in (
        ("remove", _remove, "remove a job"),
        ("pause", _pause, "pause a job (it keeps its schedule)"),
        ("resume", _resume, "resume a paused job"),
        ("run", _run, "run a job now, through the running daemon"),
    ):
        actions.add(
            name, help=text, run=_on_jobs(run), example=f"squidd cron {name} morning"
        ).add_argument("name")


def _on_jobs(action: Action) -> Callable[[argparse.Namespace, Settings], int]:
    """The handler of one action: the service's words printed, its refusals said (exit 1,
    2 for a job that cannot be made as given)."""

    def run(args: argparse.Namespace, settings: Settings) -> int:
        try:
            refuse_newer(settings.storage.data_dir, squidd=__version__)
            _known_agent(settings, getattr(args, "agent", ""))
            service = command_line_cron(settings, JobsFile(settings.storage.data_dir))
            args.deliveries = CronDeliveries(settings.storage.data_dir)
            print(anyio.run(action, service, args))
        except (StorageError, JobListError, DataDirTooNewError) as exc:
            print(f"cron: {exc}", file=sys.stderr)
            return 1
        except ValueError as exc:
            print(f"cron: {exc}", file=sys.stderr)
            return 2
        return 0

    return run


def _known_agent(settings: Settings, agent: str) -> None:
    if agent and agent not in settings.agent_names:
        raise ValueError(f"no agent named {agent!r} (agents: {', '.join(settings.agent_names)})")


async def _list(service: CronJobs, args: argparse.Namespace) -> str:
    """The jobs, each followed by its last delivery when the daemon recorded one (a failed
    one with its reason)."""
    jobs = await service.jobs()
    if not jobs:
        return await service.listing()
    deliveries = args.deliveries.read_sync()
    lines = []
    for job in jobs:
        lines.append(format_job(job))
        if note := delivery_note(deliveries.get(job.name)):
            lines.append(f"  {note}")
    return "\n".join(lines)


async def _add(service: CronJobs, args: argparse.Namespace) -> str:
    return await service.add(
        args.name,
        args.prompt,
        cron=args.cron,
        every=args.every,
        at=args.at,
        timezone=args.timezone,
        target=args.target,
        created_by="cli",
        agent=args.agent,
    )


async def _remove(service: CronJobs, args: argparse.Namespace) -> str:
    return await service.remove(args.name)


async def _pause(service: CronJobs, args: argparse.Namespace) -> str:
    return await service.pause(args.name)


async def _resume(service: CronJobs, args: argparse.Namespace) -> str:
    return await service.resume(args.name)


async def _run(service: CronJobs, args: argparse.Namespace) -> str:
    return await service.run_now(args.name)
