"""Backups from the settings: the archive `squidd backup create` writes, the scheduled ones
the daemon writes every `[backup] every` (a supervised child), and the data dir made ready
for this squidd at start (its format checked, an older one migrated after a backup).

Scheduled backups are `squidd-backup-<UTC time>.tar.gz` in `[backup] dir`; after each new
one only the newest `keep` of them stay. The next one is due `every` after the newest there
is, so a restart neither skips one nor makes an extra one. The temporary file of a backup
killed midway (`.squidd-backup-*.partial`, never a backup by name) is removed after a
scheduled one once it is older than the interval.
"""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
import structlog
from anyio.abc import TaskStatus

from squidd import __version__
from squidd.config import Settings
from squidd.core.supervisor import ChildHealth
from squidd.gateway.status import daemon_answers, socket_path
from squidd.store.backup import BackupError, Manifest, Source, create_backup
from squidd.store.format import CURRENT, open_data_dir, read_format, refuse_newer

__all__ = [
    "ScheduledBackups",
    "backup_now",
    "default_name",
    "prepare_data_dir",
    "secret_files",
]

log = structlog.get_logger()

PREFIX = "squidd-backup-"
SUFFIX = ".tar.gz"


def default_name(now: datetime | None = None) -> str:
    moment = now or datetime.now(UTC)
    return f"{PREFIX}{moment.strftime('%Y%m%dT%H%M%SZ')}{SUFFIX}"


def secret_files(settings: Settings) -> tuple[str, ...]:
    """What holds secrets in the data dir, as each store declares it: each Matrix account's
    files (its token and keys, its cross-signing identity; an agent's own account's under
    `agents/<name>/`) and the API's keys file when it
    lies in the data dir. Imported here, when a backup is made, not at start."""
    from squidd.channels.matrix.identity.local import SECRET_FILES as IDENTITY
    from squidd.channels.matrix.state import SECRET_FILES as ACCOUNT

    data_dir = settings.storage.data_dir
    found = [*ACCOUNT, *IDENTITY]
    for account in settings.matrix_accounts():  # an agent's own account: under agents/<name>/
        own = account.settings.storage.data_dir
        if own != data_dir and own.is_relative_to(data_dir):
            found += [
                (own.relative_to(data_dir) / name).as_posix() for name in (*ACCOUNT, *IDENTITY)
            ]
    keys = settings.api.keys_path(data_dir)
    if keys.is_relative_to(data_dir):
        found.append(keys.relative_to(data_dir).as_posix())
    return tuple(found)


def backup_now(settings: Settings, target: Path, *, secrets: bool) -> Manifest:
    """One archive of the data dir and the workspace at `target` (blocking)."""
    data_dir = settings.storage.data_dir
    found = read_format(data_dir) or CURRENT
    source = Source(data_dir, settings.workspace_dir, found, __version__, secret_files(settings))
    return create_backup(source, target, secrets=secrets)


def prepare_data_dir(settings: Settings) -> list[int]:
    """The data dir made ready for this squidd (blocking); see `store.format`. A data dir a
    daemon is serving right now is not migrated under it: this start stops at the socket."""
    data_dir = settings.storage.data_dir
    refuse_newer(data_dir, squidd=__version__)
    if daemon_answers(socket_path(settings)):
        return []
    return open_data_dir(data_dir, settings.workspace_dir, squidd=__version__)


class ScheduledBackups:
    """The daemon's child `backup`: one archive every `[backup] every`, the newest kept."""

    def __init__(self, settings: Settings, every_s: float) -> None:
        self._settings = settings
        self._every_s = every_s
        self._dir = settings.backup_dir
        self._keep = settings.backup.keep

    def _ours(self) -> list[Path]:
        try:
            found = [p for p in self._dir.iterdir() if p.name.startswith(PREFIX)]
        except FileNotFoundError:
            return []
        return sorted(p for p in found if p.name.endswith(SUFFIX))

    def _due_in_s(self) -> float:
        ours = self._ours()
        if not ours:
            return 0.0
        return max(0.0, ours[-1].stat().st_mtime + self._every_s - time.time())

    def _make(self) -> None:
        target = self._dir / default_name()
        secrets = self._settings.backup.include_secrets
        manifest = backup_now(self._settings, target, secrets=secrets)
        ours = self._ours()
        for old in ours[: max(0, len(ours) - self._keep)]:
            old.unlink(missing_ok=True)
        self._drop_leftovers()
        log.info(
            "backup_written",
            file=str(target),
            files=len(manifest.files),
            bytes=manifest.total_bytes,
            removed=max(0, len(ours) - self._keep),
        )

    def _drop_leftovers(self) -> None:
        """Temporary files of backups killed midway (older than an interval: none of them
        can still be in the making)."""
        cutoff = time.time() - self._every_s
        for path in self._dir.glob(f".{PREFIX}*.partial"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    log.info("backup_leftover_removed", file=str(path))

    async def run(self, health: ChildHealth, *, task_status: TaskStatus[None]) -> None:
        task_status.started()
        while True:
            await anyio.sleep(await anyio.to_thread.run_sync(self._due_in_s))
            try:
                await anyio.to_thread.run_sync(self._make)
            except BackupError as exc:
                # Worth an error line: the owner believes backups are being made.
                log.error("backup_failed", reason=str(exc))  # noqa: TRY400 - no trace needed
                await anyio.sleep(min(self._every_s, 3600.0))
