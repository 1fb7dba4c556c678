"""`squidd cron list|add|remove`: edit the jobs file the daemon runs from.

The daemon notices the change within `cron.poll_s` seconds; nothing else needs restarting.
A jobs file that cannot be read is reported and left as it is.
"""

from __future__ import annotations

import argparse
import functools
import sys
from datetime import UTC, datetime

from squidd.config import Settings
from squidd.core.cron import JobListError, make_job, with_job, without_job
from squidd.errors import StorageError
from squidd.store.cron_jobs import JobsFile
from squidd.tools.cron import format_job


def cron_command(settings: Settings, args: argparse.Namespace) -> int:
    jobs = JobsFile(settings.storage.data_dir)
    try:
        if args.cron_command == "list":
            return _list(jobs)
        if args.cron_command == "add":
            return _add(settings, jobs, args)
        if args.cron_command == "remove":
            return _remove(jobs, args.name)
    except StorageError as exc:
        print(f"cron: {exc}", file=sys.stderr)
        return 1
    except JobListError as exc:
        print(f"cron: {exc}", file=sys.stderr)
        return 1
    raise AssertionError(f"unhandled cron action {args.cron_command}")  # pragma: no cover


def _list(jobs: JobsFile) -> int:
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


def _remove(jobs: JobsFile, name: str) -> int:
    jobs.modify_sync(functools.partial(without_job, name=name))
    print(f"removed {name}")
    return 0
