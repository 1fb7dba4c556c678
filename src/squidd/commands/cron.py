"""`squidd cron list|add|remove`: edit the jobs file the daemon runs from.

The daemon notices the change within `cron.poll_s` seconds; nothing else needs restarting.
A jobs file that cannot be read is reported and left as it is.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from datetime import UTC, datetime

from squidd import __version__
from squidd.commands import Commands
from squidd.config import Settings
from squidd.core.cron import JobListError, make_job, with_job, without_job
from squidd.errors import StorageError
from squidd.store.cron_jobs import JobsFile
from squidd.store.format import DataDirTooNewError, refuse_newer
from squidd.tools.cron import format_job

Action = Callable[[Settings, JobsFile, argparse.Namespace], int]


def register(commands: Commands) -> None:
    cron = commands.add("cron", help="manage scheduled prompts")
    actions = commands.actions(cron, "cron_command")
    actions.add("list", help="list jobs", run=_on_jobs(_list))
    add = actions.add("add", help="add a job", run=_on_jobs(_add))
    add.add_argument("--name", required=True)
    add.add_argument("--prompt", required=True)
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="a cron expression, e.g. '0 8 * * mon-fri'")
    when.add_argument("--every", help="an interval, e.g. 30m, 2h, 1d")
    when.add_argument("--at", help="one time, ISO 8601, e.g. 2026-12-24T18:00")
    add.add_argument("--timezone", default=None, help="IANA timezone (default from config)")
    add.add_argument("--target", default="", help="where to deliver, e.g. email:me@x.org")
    remove = actions.add("remove", help="remove a job", run=_on_jobs(_remove))
    remove.add_argument("name")


def _on_jobs(action: Action) -> Callable[[argparse.Namespace, Settings], int]:
    """The handler of one action: the jobs file opened, its read and write errors said."""

    def run(args: argparse.Namespace, settings: Settings) -> int:
        try:
            refuse_newer(settings.storage.data_dir, squidd=__version__)
            return action(settings, JobsFile(settings.storage.data_dir), args)
        except (StorageError, JobListError, DataDirTooNewError) as exc:
            print(f"cron: {exc}", file=sys.stderr)
            return 1

    return run


def _list(settings: Settings, jobs: JobsFile, args: argparse.Namespace) -> int:
    found = jobs.load_sync()
    if not found:
        print("no jobs")
    for job in found:
        print(format_job(job))
    return 0


def _add(settings: Settings, jobs: JobsFile, args: argparse.Namespace) -> int:
    try:
        job = make_job(
            args.name,
            args.prompt,
            cron=args.cron,
            every=args.every,
            at=args.at,
            timezone=args.timezone or settings.cron.default_timezone,
            target=args.target,
            created_by="cli",
            now=datetime.now(UTC),
        )
    except ValueError as exc:
        print(f"cron: {exc}", file=sys.stderr)
        return 2

    jobs.modify_sync(functools.partial(with_job, job=job))
    print(f"added {format_job(job)}")
    return 0


def _remove(settings: Settings, jobs: JobsFile, args: argparse.Namespace) -> int:
    jobs.modify_sync(functools.partial(without_job, name=args.name))
    print(f"removed {args.name}")
    return 0
