"""The media store: files that came with messages, kept per session for a limited time.

`<data dir>/media/<safe session name>/<sha256 of the content><safe extension>`. Nothing of
the sender's file name reaches the path (only an extension of `[a-z0-9]{1,8}`), so a hostile
name (`../x`, NUL, 10,000 characters) cannot write outside the store; the same content sent
twice is one file. Content is streamed to a temporary file beside its final place while it
is hashed and counted, so a large file is never held in memory; over the size cap the
partial file is removed and the attachment is a reference with the note "too large".
`sweep` removes files older than the configured lifetime (the daemon calls it), and at
start the partial files a crash left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import IO, Unpack

import anyio
import structlog

from squidd.core.models import Attachment
from squidd.core.ports import IncomingFile
from squidd.errors import StorageError
from squidd.fs import display_name, make_private_dir, safe_extension, safe_name

log = structlog.get_logger(__name__)

TOO_LARGE = "too large"
_PARTIAL_PREFIX = ".incoming-"  # a download in progress (or left by a crash)


class MediaStore:
    """Stores attachment content under the data dir and removes it after `lifetime_s`."""

    def __init__(self, data_dir: Path, *, lifetime_s: float) -> None:
        self.root = data_dir / "media"
        self._lifetime_s = lifetime_s

    def session_dir(self, session_id: str) -> Path:
        return self.root / safe_name(session_id)

    async def save(self, session_id: str, **file: Unpack[IncomingFile]) -> Attachment:
        """Stream the file's chunks into the store; a reference to the kept file, or a "too
        large" one."""
        kind, name, mime = file["kind"], file["name"], file["mime"]
        chunks, max_bytes = file["chunks"], file["max_bytes"]
        shown = display_name(name)
        directory = self.session_dir(session_id)
        handle, tmp = await anyio.to_thread.run_sync(_open_temp, directory)
        digest = hashlib.sha256()
        size = 0
        kept = False
        try:
            async for chunk in chunks:
                size += len(chunk)
                if size > max_bytes:
                    break
                digest.update(chunk)
                await anyio.to_thread.run_sync(handle.write, chunk)
            else:
                kept = True
            if not kept:
                log.info("media_too_large", session=session_id, max_bytes=max_bytes)
                return Attachment(kind, shown, mime, size, note=TOO_LARGE)
            final = directory / f"{digest.hexdigest()}{safe_extension(name)}"
            await anyio.to_thread.run_sync(_finish, handle, tmp, final)
            log.info("media_saved", session=session_id, size=size, kind=kind)
            return Attachment(kind, shown, mime, size, digest.hexdigest(), str(final))
        finally:
            if not handle.closed:
                handle.close()
            with contextlib.suppress(FileNotFoundError):
                await anyio.to_thread.run_sync(os.unlink, tmp)

    async def sweep(self, *, now: float | None = None, leftovers: bool = False) -> int:
        """Remove media older than the lifetime (and emptied session dirs); how many files.

        `leftovers`: also every partial file a download was writing (`.incoming-*`), of any
        age. Only at start, before any channel runs: a crash (SIGKILL, power loss) in the
        middle of a download leaves one behind, and nothing else would ever remove it
        before the lifetime, however large it was. The message it came with was never
        handed on, so it comes again and the file is fetched anew.
        """
        when = time.time() if now is None else now
        return await anyio.to_thread.run_sync(self._sweep, when, leftovers)

    def _sweep(self, now: float, leftovers: bool) -> int:
        removed = partial = 0
        if not self.root.is_dir():
            return 0
        for session in self.root.iterdir():
            if not session.is_dir() or session.is_symlink():
                continue
            for entry in session.iterdir():
                try:
                    if not entry.is_file():
                        continue
                    if leftovers and entry.name.startswith(_PARTIAL_PREFIX):
                        entry.unlink()
                        partial += 1
                    elif now - entry.stat().st_mtime > self._lifetime_s:
                        entry.unlink()
                        removed += 1
                except OSError as exc:
                    log.warning("media_sweep_failed", path=str(entry), reason=str(exc))
            with contextlib.suppress(OSError):
                session.rmdir()  # only succeeds when empty
        if partial:
            log.info("media_partial_files_removed", removed=partial, note="left by a crash")
        if removed:
            log.info("media_swept", removed=removed)
        return removed + partial


def _open_temp(directory: Path) -> tuple[IO[bytes], str]:
    try:
        make_private_dir(directory)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=_PARTIAL_PREFIX, suffix=".tmp")
    except OSError as exc:
        raise StorageError(f"cannot write into {directory}: {exc.strerror or exc}") from exc
    return os.fdopen(fd, "wb"), tmp


def _finish(handle: IO[bytes], tmp: str, final: Path) -> None:
    """Flush and rename into place; an existing file of the same hash is refreshed instead."""
    try:
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()
        os.chmod(tmp, 0o600)
        os.replace(tmp, final)  # same content, same name: replacing it is harmless
    except OSError as exc:
        raise StorageError(f"cannot store {final}: {exc.strerror or exc}") from exc
