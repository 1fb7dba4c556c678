"""The data dir's format version, and the steps that bring an older data dir forward.

`<data dir>/format.json` says which layout the files follow and which squidd wrote it:
`{"format": 2, "squidd": "0.1.0"}`. Format 1 is the layout from before the marker existed:
a data dir with state in it and no marker is format 1. A new (missing or empty) data dir is
marked with the current format at once, by whichever command makes it: `run` here, a command
that writes (`chat`, `init`) through `claim_new` before it writes, and every other command
through `mark_made` after it ran (cli.py), so a data dir first made by `cron add` or `backup
create` is never taken for format 1 later.

On start, a data dir of an older format is migrated forward: first a backup of all of it
(secrets included: it stays beside the data, `backups/pre-format-<N>-<time>.tar.gz`), then
each step in order, the marker rewritten after each, so a crash resumes at the step that
was cut short (every step can run twice). A data dir of a newer format is refused with one
line: an older squidd must not misread what a newer one wrote.

Steps:
* 1 -> 2: owner-only modes: every directory 0700, every file 0600 (files written before
  squidd kept to that could be readable by any local user).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from squidd.errors import SquiddError, StorageError
from squidd.fs import DIR_MODE, FILE_MODE, atomic_write_text, make_private_dir, read_text_or_empty
from squidd.store.backup import Source, create_backup

__all__ = [
    "CURRENT",
    "MIGRATIONS",
    "DataDirTooNewError",
    "claim_new",
    "mark_made",
    "open_data_dir",
    "read_format",
    "refuse_newer",
]

log = structlog.get_logger()

CURRENT = 2
MARKER = "format.json"
# Entries a data dir may hold that are no state of its own (made by `squidd init`).
_NOT_STATE = frozenset({MARKER, "workspace"})


class DataDirTooNewError(SquiddError):
    """The data dir was written by a newer squidd, in a format this one cannot read."""


def _private_modes(data_dir: Path) -> None:
    """1 -> 2: every directory 0700, every file 0600; symlinks and sockets left alone."""
    for current, dirs, names in os.walk(data_dir):
        os.chmod(current, DIR_MODE)
        for name in names:
            path = Path(current) / name
            if stat.S_ISREG(path.lstat().st_mode):
                os.chmod(path, FILE_MODE)
        dirs[:] = [d for d in dirs if not (Path(current) / d).is_symlink()]


@dataclass(frozen=True, slots=True)
class Migration:
    to: int
    what: str
    step: Callable[[Path], None]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, "owner-only modes (0700 directories, 0600 files)", _private_modes),
)


def read_format(data_dir: Path) -> int | None:
    """The data dir's format; None for a new one (missing, or holding no state yet)."""
    text = read_text_or_empty(data_dir / MARKER)
    if text.strip():
        try:
            value = json.loads(text)["format"]
            if isinstance(value, int) and value >= 1:
                return value
        except (ValueError, KeyError, TypeError):
            pass
        raise StorageError(f"{data_dir / MARKER} is not a format marker (damaged?)")
    try:
        names = {entry.name for entry in data_dir.iterdir()}
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read {data_dir}: {exc.strerror or exc}") from exc
    return 1 if names - _NOT_STATE else None


def _mark(data_dir: Path, version: int, squidd: str) -> None:
    atomic_write_text(data_dir / MARKER, json.dumps({"format": version, "squidd": squidd}) + "\n")


def claim_new(data_dir: Path, *, squidd: str) -> bool:
    """A new data dir (missing, or holding no state yet) made and marked with the current
    format now, before this squidd writes into it; True when it was new. OSError when it
    cannot be made or marked."""
    if read_format(data_dir) is not None:
        return False
    make_private_dir(data_dir)
    _mark(data_dir, CURRENT, squidd)
    return True


def mark_made(data_dir: Path, *, squidd: str) -> bool:
    """Mark with the current format a data dir that was new before a command ran and holds
    no marker now (whatever the command wrote there is of the current format); the caller
    knows it was new. True when marked; OSError when it cannot be."""
    if not data_dir.is_dir() or read_text_or_empty(data_dir / MARKER).strip():
        return False
    _mark(data_dir, CURRENT, squidd)
    return True


def _written_by(data_dir: Path) -> str:
    try:
        return str(json.loads(read_text_or_empty(data_dir / MARKER))["squidd"])
    except (ValueError, KeyError, TypeError):
        return "an unknown version"


def refuse_newer(data_dir: Path, *, squidd: str) -> None:
    """DataDirTooNewError (one line) when the data dir is of a newer format than this
    squidd reads; what a command that writes beside the daemon checks first."""
    found = read_format(data_dir)
    if found is not None and found > CURRENT:
        raise DataDirTooNewError(
            f"{data_dir} holds data format {found}, written by squidd {_written_by(data_dir)}; "
            f"this squidd ({squidd}) reads format {CURRENT} and older: run the newer squidd, "
            "or restore a backup made before the upgrade into a new folder"
        )


def open_data_dir(data_dir: Path, workspace: Path, *, squidd: str) -> list[int]:
    """Make the data dir ready for this squidd; the formats it was migrated to (if any).

    Raises DataDirTooNewError (one line) for a newer format, StorageError when the dir
    cannot be read, marked or backed up."""
    if claim_new(data_dir, squidd=squidd):
        return []
    found = read_format(data_dir) or CURRENT
    if found > CURRENT:
        refuse_newer(data_dir, squidd=squidd)
    steps = [m for m in MIGRATIONS if m.to > found]
    if not steps:
        return []
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    backup = data_dir / "backups" / f"pre-format-{CURRENT}-{stamp}.tar.gz"
    source = Source(data_dir, workspace, found, squidd, ())  # secrets kept: a local copy
    create_backup(source, backup, secrets=True)
    log.info("data_dir_backed_up", file=str(backup), format=found, reason="before a migration")
    for migration in steps:
        try:
            migration.step(data_dir)
        except OSError as exc:
            raise StorageError(
                f"cannot migrate {data_dir} to format {migration.to}: {exc.strerror or exc}"
            ) from exc
        _mark(data_dir, migration.to, squidd)
        log.info("data_dir_migrated", to=migration.to, what=migration.what)
    return [m.to for m in steps]
