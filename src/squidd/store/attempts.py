"""Attempt counts of inputs being worked on, so poison is counted across restarts.

`<data dir>/gateway/attempts/<safe name of the key>.json`: `{"key", "count", "reason"}`,
written before each attempt (core/poison.py) and removed once the input is finished. Only
inputs in flight have a file, so the folder stays as small as the outbox.

A count is replaced with a rename but not fsynced: it must survive the process dying (a
crash, SIGKILL, the OOM killer), which the page cache does; after a power cut a count may be
one short, which costs one more attempt, never a lost message. This keeps the write that
every message pays before its turn cheap. The daemon is the folder's only writer, so it
reads the folder once and answers from memory afterwards.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
import structlog

from squidd.core.poison import message_key
from squidd.errors import StorageError
from squidd.fs import make_private_dir, open_private, safe_name
from squidd.store.records import Codec
from squidd.text import utf8

__all__ = ["AttemptsDir"]

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class Attempts:
    """One input's file: its key, the attempts counted, the last failure's reason."""

    key: str
    count: int
    reason: str = ""


ATTEMPTS: Codec[Attempts] = Codec(Attempts)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        make_private_dir(path.parent)
        fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "wb") as handle:
            handle.write(utf8(text))
        os.replace(tmp, path)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _remove(path: Path) -> None:
    try:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    except OSError as exc:
        raise StorageError(f"cannot remove {path}: {exc.strerror or exc}") from exc


class AttemptsDir:
    """Implements `core.poison.AttemptLog` on a directory of small files."""

    def __init__(self, data_dir: Path) -> None:
        self._dir = data_dir / "gateway" / "attempts"
        self._counts: dict[str, tuple[int, str]] | None = None
        self._loading = anyio.Lock()

    def _path(self, key: str) -> Path:
        return self._dir / f"{safe_name(key)}.json"

    def _load_sync(self) -> dict[str, tuple[int, str]]:
        counts: dict[str, tuple[int, str]] = {}
        try:
            paths = [p for p in self._dir.iterdir() if p.suffix == ".json"]
        except FileNotFoundError:
            return counts
        for path in paths:
            try:
                kept = ATTEMPTS.loads(path.read_text(encoding="utf-8"))
                counts[kept.key] = (kept.count, kept.reason)
            except (OSError, ValueError, KeyError, TypeError):
                # Torn by a power cut (never fsynced): dropped; the input gets its tries again.
                log.warning("attempt_count_unreadable", path=str(path))
                with contextlib.suppress(OSError):
                    path.unlink()
        return counts

    async def _ensure(self) -> dict[str, tuple[int, str]]:
        if self._counts is None:
            async with self._loading:
                if self._counts is None:
                    self._counts = await anyio.to_thread.run_sync(self._load_sync)
        return self._counts

    async def get(self, key: str) -> tuple[int, str]:
        return (await self._ensure()).get(key, (0, ""))

    async def set(self, key: str, count: int, reason: str) -> None:
        counts = await self._ensure()
        text = ATTEMPTS.dumps(Attempts(key, count, reason))
        await anyio.to_thread.run_sync(_write, self._path(key), text)
        counts[key] = (count, reason)

    async def clear(self, key: str) -> None:
        counts = await self._ensure()
        if key not in counts:
            return
        await anyio.to_thread.run_sync(_remove, self._path(key))
        del counts[key]

    def leftover(self, channel: str, source_id: str) -> Callable[[], None] | None:
        """store/handled.py's `Leftover`: the message's count file's removal, if it has one
        (counted under core/poison.py's `message_key`)."""
        key = message_key(channel, source_id)
        if self._counts is None or key not in self._counts:
            return None
        return partial(_remove, self._path(key))

    def dropped(self, channel: str, source_id: str) -> None:
        if self._counts is not None:
            self._counts.pop(message_key(channel, source_id), None)

    async def count(self) -> int:
        """Inputs with attempts counted right now (for tests and status)."""
        return len(await self._ensure())
