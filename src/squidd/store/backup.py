"""Backups of a data dir and its workspace: one archive, checked file by file, restored only
into an empty directory.

The archive is a gzip'd tar: `data/<path>` for each file of the data dir, `workspace/<path>`
for the workspace when it lies outside the data dir, and `manifest.json` last: the backup
format, the data dir's format version, the squidd version, whether secrets are inside, and
each file's size and SHA-256. `verify` reads everything back against the manifest.

Consistent while the daemon runs: each file is copied under a shared `flock`, the lock every
append of squidd takes exclusively (`fs.append_lines_locked`; the audit log's own appends),
so an append-only file is copied between two appends, never in the middle of a line; the
audit head is copied under its log's lock, so the two agree. The turn journals are appended
without a lock (the daemon is their one writer); a copy may end in a torn line, which their
reader cuts off, as it does after a crash. Files replaced by rename
(`fs.atomic_write_*`) are read whole through the open file. SQLite files are copied through
SQLite's backup API. Left out: the indexes, every agent's (the keyword index and the recall
vectors: derived data, rebuilt from the histories, summaries and MEMORY.md), the
backups folder, temporary files, sockets and symlinks, and, unless `secrets` is asked for,
the Matrix credentials, the cross-signing keys and the crypto store.

A crash never leaves a half archive under the final name: it is written to a temporary name
in the same folder, fsync'd and renamed. A restore checks the whole archive first, extracts
into a new folder beside the target and renames it onto the (empty or missing) target.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import shutil
import sqlite3
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any

from squidd.errors import SquiddError
from squidd.fs import FILE_MODE, fsync_dir, make_private_dir
from squidd.store.records import Codec

__all__ = [
    "BackupError",
    "Entry",
    "Manifest",
    "Source",
    "create_backup",
    "restore_backup",
    "verify_backup",
]

BACKUP_FORMAT = 1
MANIFEST = "manifest.json"
DATA = "data"
WORKSPACE = "workspace"
PARTIAL = ".partial"
_SPOOL_BYTES = 8 * 1024 * 1024
_CHUNK = 1024 * 1024
_SQLITE_HEADER = b"SQLite format 3\x00"

# Top-level folders never archived: a cache rebuilt from the histories, and the backups.
SKIPPED = frozenset({"index", "backups"})
# Files written under another file's lock: copied under that lock, together with it.
LOCKED_WITH = {"audit/head.json": "audit/calls.jsonl"}


class BackupError(SquiddError):
    """A backup could not be made, read, verified or restored; the message names the file."""


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    data_format: int
    squidd: str
    created_at: str
    secrets: bool
    files: tuple[Entry, ...]

    def to_json(self) -> str:
        return json.dumps({"backup": BACKUP_FORMAT, **_MANIFEST.dump(self)}, indent=1)

    @classmethod
    def from_json(cls, raw: bytes) -> Manifest:
        data: Any = json.loads(raw)
        if data.get("backup") != BACKUP_FORMAT:
            raise ValueError(f"backup format {data.get('backup')!r}")
        return _MANIFEST.load(data)

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.files)


_MANIFEST: Codec[Manifest] = Codec(Manifest)


@dataclass(frozen=True, slots=True)
class Source:
    """What to archive: the data dir, and the workspace (archived apart when it lies
    outside the data dir), with the data dir's format version for the manifest."""

    data_dir: Path
    workspace: Path
    data_format: int
    squidd: str
    secret_files: tuple[str, ...]
    """Files and folders (relative to the data dir, `/`-separated) that hold secrets, as
    each store declares them (gathered by gateway/backups.py): kept out unless asked for."""


# --- walking ---------------------------------------------------------------------------


def _skipped(rel: PurePosixPath, secret_files: tuple[str, ...]) -> bool:
    if rel.parts[0] in SKIPPED or rel.name.endswith((".tmp", PARTIAL)):
        return True
    if rel.parts[0] == "agents" and len(rel.parts) > 2 and rel.parts[2] in SKIPPED:
        return True  # another agent's indexes, as the default agent's
    if str(rel) in LOCKED_WITH:
        return True  # copied with the file whose lock guards it
    return any(rel == PurePosixPath(s) or str(rel).startswith(f"{s}/") for s in secret_files)


def _files(
    root: Path, *, secret_files: tuple[str, ...], skip_top: bool
) -> Iterator[tuple[PurePosixPath, Path]]:
    """Regular files under `root` (no symlink followed), sorted, minus what is left out."""
    for current, dirs, names in os.walk(root):
        dirs.sort()
        base = Path(current)
        for name in sorted(names):
            path = base / name
            rel = PurePosixPath(path.relative_to(root).as_posix())
            if skip_top and _skipped(rel, secret_files):
                continue
            if stat.S_ISREG(path.lstat().st_mode):
                yield rel, path


# --- copying one file ------------------------------------------------------------------


@contextlib.contextmanager
def _shared_lock(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield fd
    finally:
        os.close(fd)  # closing drops the lock


def _spool(fd: int) -> tuple[IO[bytes], Entry]:
    """The open file's bytes from its start, in a spool, with their size and digest."""
    spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115
    digest, size = hashlib.sha256(), 0
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, _CHUNK):
        digest.update(chunk)
        spool.write(chunk)
        size += len(chunk)
    spool.seek(0)
    return spool, Entry("", size, digest.hexdigest())


def _sqlite_copy(path: Path) -> tuple[IO[bytes], Entry]:
    """A consistent copy of a live SQLite file, through SQLite's own backup."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "copy.db"
        source = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            target = sqlite3.connect(copy)
            with target:
                source.backup(target)
            target.close()
        finally:
            source.close()
        fd = os.open(copy, os.O_RDONLY)
        try:
            return _spool(fd)
        finally:
            os.close(fd)


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER


def _add(tar: tarfile.TarFile, name: str, spool: IO[bytes], entry: Entry) -> Entry:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = entry.size, FILE_MODE, int(datetime.now(UTC).timestamp())
    with spool:
        tar.addfile(info, spool)
    return Entry(name, entry.size, entry.sha256)


def _copy(tar: tarfile.TarFile, prefix: str, rel: PurePosixPath, path: Path) -> list[Entry]:
    """Archive one file (and the files written under its lock) as `prefix/rel`."""
    if (
        rel.name.endswith(("-wal", "-shm", "-journal"))
        and path.with_name(rel.name.rsplit("-", 1)[0]).exists()
    ):
        return []  # part of a SQLite file, which its backup copy contains
    if _is_sqlite(path):
        spool, entry = _sqlite_copy(path)
        return [_add(tar, f"{prefix}/{rel}", spool, entry)]
    companions = [c for c, holder in LOCKED_WITH.items() if holder == str(rel)]
    taken: list[tuple[str, IO[bytes], Entry]] = []
    with _shared_lock(path) as fd:
        taken.append((f"{prefix}/{rel}", *_spool(fd)))
        for companion in companions:
            other = path.parent / PurePosixPath(companion).name
            with contextlib.suppress(FileNotFoundError):
                cfd = os.open(other, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    taken.append((f"{prefix}/{companion}", *_spool(cfd)))
                finally:
                    os.close(cfd)
    return [_add(tar, name, spool, entry) for name, spool, entry in taken]


# --- create ----------------------------------------------------------------------------


def _write_archive(raw: IO[bytes], source: Source, *, secrets: bool) -> Manifest:
    entries: list[Entry] = []
    outside = not source.workspace.resolve().is_relative_to(source.data_dir.resolve())
    with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        secret_files = () if secrets else source.secret_files
        for rel, path in _files(source.data_dir, secret_files=secret_files, skip_top=True):
            with contextlib.suppress(FileNotFoundError):  # removed since the listing
                entries.extend(_copy(tar, DATA, rel, path))
        if outside and source.workspace.is_dir():
            for rel, path in _files(source.workspace, secret_files=(), skip_top=False):
                with contextlib.suppress(FileNotFoundError):
                    entries.extend(_copy(tar, WORKSPACE, rel, path))
        manifest = Manifest(
            source.data_format,
            source.squidd,
            datetime.now(UTC).isoformat(timespec="seconds"),
            secrets,
            tuple(entries),
        )
        body = manifest.to_json().encode()
        _add(tar, MANIFEST, io.BytesIO(body), Entry("", len(body), ""))
    return manifest


def create_backup(source: Source, target: Path, *, secrets: bool = False) -> Manifest:
    """Write the archive of `source` to `target` (never half of one: temp name, rename)."""
    try:
        make_private_dir(target.parent)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=PARTIAL)
    except OSError as exc:
        raise BackupError(f"cannot write {target}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as raw:
            manifest = _write_archive(raw, source, secrets=secrets)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError | sqlite3.Error):
            raise BackupError(f"cannot write {target}: {exc}") from exc
        raise
    return manifest


# --- verify ----------------------------------------------------------------------------


def _safe_member(member: tarfile.TarInfo) -> PurePosixPath:
    name = PurePosixPath(member.name)
    if (
        not member.isfile()
        or name.is_absolute()
        or ".." in name.parts
        or name.parts[0] not in (DATA, WORKSPACE)
        or len(name.parts) < 2
    ):
        raise ValueError(f"{member.name}: not a file this archive may hold")
    return name


def _read_members(path: Path, sink: Path | None) -> tuple[Manifest, dict[str, Entry]]:
    """Every member's size and digest (written under `sink` when given), and the manifest."""
    found: dict[str, Entry] = {}
    manifest: Manifest | None = None
    current = "(the start)"
    try:
        raw = path.open("rb")
    except OSError as exc:  # not there, not a file, not ours to read: nothing is damaged
        raise BackupError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    try:
        with raw, tarfile.open(fileobj=raw, mode="r:gz") as tar:
            for member in tar:
                current = member.name
                handle = tar.extractfile(member)
                if member.name == MANIFEST and handle is not None:
                    manifest = Manifest.from_json(handle.read())
                    continue
                name = _safe_member(member)
                if handle is None:  # not a regular file: _safe_member refused it already
                    continue
                found[member.name] = _digest_into(handle, name, sink)
    except (tarfile.TarError, EOFError, zlib.error, OSError, ValueError, KeyError) as exc:
        raise BackupError(f"{path}: damaged at {current}: {exc}") from exc
    if manifest is None:
        raise BackupError(f"{path}: no {MANIFEST} (not a squidd backup, or cut short)")
    return manifest, found


def _digest_into(handle: IO[bytes], name: PurePosixPath, sink: Path | None) -> Entry:
    digest, size = hashlib.sha256(), 0
    out: IO[bytes] | None = None
    if sink is not None:
        # `data/x` is the restored folder's `x`, `workspace/x` its workspace's.
        rest = name.parts[1:] if name.parts[0] == DATA else name.parts
        target = sink.joinpath(*rest)
        make_private_dir(target.parent)
        out = open(target, "xb")  # noqa: SIM115 - closed below
        os.chmod(target, FILE_MODE)
    try:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            if out is not None:
                out.write(chunk)
        if out is not None:
            out.flush()
            os.fsync(out.fileno())
    finally:
        if out is not None:
            out.close()
    return Entry(str(name), size, digest.hexdigest())


def _check(path: Path, manifest: Manifest, found: dict[str, Entry]) -> None:
    listed = {entry.name: entry for entry in manifest.files}
    for name, entry in listed.items():
        got = found.get(name)
        if got is None:
            raise BackupError(f"{path}: {name} is in the manifest but not in the archive")
        if got.size != entry.size or got.sha256 != entry.sha256:
            raise BackupError(f"{path}: {name} does not match its SHA-256 in the manifest")
    extra = sorted(set(found) - set(listed))
    if extra:
        raise BackupError(f"{path}: {extra[0]} is not in the manifest")


def verify_backup(path: Path) -> Manifest:
    """The manifest of a whole, undamaged archive; BackupError naming what is wrong."""
    manifest, found = _read_members(path, None)
    _check(path, manifest, found)
    return manifest


# --- restore ---------------------------------------------------------------------------


def restore_backup(path: Path, target: Path, *, max_format: int) -> Manifest:
    """Restore the archive into `target`, which must be missing or an empty directory."""
    manifest = verify_backup(path)
    if manifest.data_format > max_format:
        raise BackupError(
            f"{path}: holds a data dir of format {manifest.data_format} (squidd "
            f"{manifest.squidd}); this squidd reads format {max_format} and older"
        )
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BackupError(f"{target} is not empty: a backup is restored into an empty folder only")
    try:
        make_private_dir(target.parent)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.restoring-"))
    except OSError as exc:
        raise BackupError(f"cannot restore into {target}: {exc.strerror or exc}") from exc
    try:
        _, found = _read_members(path, staging)
        _check(path, manifest, found)
        _settle(staging)
        os.replace(staging, target)  # onto a missing or empty directory only
        fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _settle(staging: Path) -> None:
    """Owner-only, and on disk before the rename makes it the target."""
    os.chmod(staging, 0o700)
    for current, _, _ in os.walk(staging):
        fsync_dir(Path(current))
