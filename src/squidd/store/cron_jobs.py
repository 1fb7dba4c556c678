"""The cron jobs file: `<data dir>/cron/jobs.json`, shared by the daemon, the agent's cron
tools and `squidd cron`.

Every change is a read-modify-write under an exclusive lock on a sibling lock file, written
atomically, so the CLI and the daemon never lose each other's edits. A file that cannot be
read is reported with its path and never overwritten: the user's jobs are not replaced by
an empty list because of a typo.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import anyio

from squidd.core.cron import CronJob
from squidd.errors import StorageError
from squidd.fs import atomic_write_text, locked, make_private_dir, open_private
from squidd.store.records import Codec, Moment, Text

_FORMAT = 1

JOB: Codec[CronJob] = Codec(
    CronJob,
    fields={
        "target": Text,
        "created_by": Text,
        "created_at": Moment,
        "next_run": Optional[Moment],  # noqa: UP045 - a runtime type, made here
        "last_run": Optional[Moment],  # noqa: UP045
    },
)
"""A job in the jobs file (times without a zone, from older files, are UTC)."""


class JobsFile:
    """Implements `squidd.core.ports.JobStore`; the `*_sync` methods serve the CLI."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "cron" / "jobs.json"
        self._lock_path = data_dir / "cron" / "jobs.lock"

    def _parse(self, raw: str) -> list[CronJob]:
        if not raw.strip():
            return []
        try:
            data = json.loads(raw)
            jobs = [JOB.load(item) for item in data["jobs"]]
            if data.get("format") != _FORMAT:
                jobs = []
                raise KeyError("format")  # noqa: TRY301 - one error path for every defect
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(
                f"{self.path} is not a valid jobs file ({exc}); it is left as it is, "
                "fix or move it away"
            ) from None
        return jobs

    def load_sync(self) -> list[CronJob]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from None
        return self._parse(raw)

    def modify_sync(self, change: Callable[[list[CronJob]], list[CronJob]]) -> list[CronJob]:
        try:
            make_private_dir(self.path.parent)
            fd = open_private(self._lock_path, os.O_RDWR)
        except OSError as exc:
            raise StorageError(f"cannot lock {self._lock_path}: {exc.strerror or exc}") from exc
        try:
            with locked(fd):
                jobs = change(self.load_sync())
                text = json.dumps(
                    {"format": _FORMAT, "jobs": [JOB.dump(job) for job in jobs]},
                    ensure_ascii=False,
                    indent=2,
                )
                atomic_write_text(self.path, text + "\n")
                return jobs
        finally:
            os.close(fd)

    def version_sync(self) -> object:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            return ("error", str(exc))
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    async def load(self) -> list[CronJob]:
        return await anyio.to_thread.run_sync(self.load_sync)

    async def modify(self, change: Callable[[list[CronJob]], list[CronJob]]) -> list[CronJob]:
        return await anyio.to_thread.run_sync(self.modify_sync, change)

    async def version(self) -> object:
        return await anyio.to_thread.run_sync(self.version_sync)
