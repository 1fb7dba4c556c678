"""A directory of small JSON records, one file per (channel, source id) key.

The outbox and the pending scheduled runs both keep such a directory under
`<data dir>/gateway/`: `<safe name of "channel:source id">.json`, each replaced atomically,
so a crash leaves a record whole or absent, never torn. The file name comes from
`squidd.fs.safe_name`, so no source id (`../x`, a Matrix event id, a Message-ID) can leave
the directory or collide with another. Records are small and few (turns in flight), so
each operation reads or writes one whole file in a worker thread.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio
import structlog

from squidd.errors import StorageError
from squidd.fs import atomic_write_text, read_text_or_empty, safe_name

log = structlog.get_logger()

T = TypeVar("T")

# AttributeError: valid JSON that is not an object (`[1, 2]`) meets `data.get` in a decoder.
_DECODE_ERRORS = (ValueError, KeyError, TypeError, AttributeError)


class JsonDir(Generic[T]):
    """Records of one kind (`kind`, snake_case, e.g. "pending_run") decoded by `decode`.

    `decode` gets the parsed JSON and raises ValueError, KeyError, TypeError or
    AttributeError when it is not a record of this kind.
    """

    def __init__(self, directory: Path, *, kind: str, decode: Callable[[Any], T]) -> None:
        self._dir = directory
        self._noun = f"a {kind.replace('_', ' ')}"
        self._unreadable_event = f"{kind}_unreadable"
        self._decode = decode

    def path(self, channel: str, source_id: str) -> Path:
        return self._dir / f"{safe_name(f'{channel}:{source_id}')}.json"

    def _get_sync(self, path: Path) -> T | None:
        text = read_text_or_empty(path)
        if not text:
            return None
        try:
            return self._decode(json.loads(text))
        except _DECODE_ERRORS as exc:
            raise StorageError(f"cannot read {path}: not {self._noun}") from exc

    async def get(self, channel: str, source_id: str) -> T | None:
        """The record, None if there is none; StorageError if the file is not one."""
        return await anyio.to_thread.run_sync(self._get_sync, self.path(channel, source_id))

    async def put(self, channel: str, source_id: str, data: Mapping[str, object]) -> None:
        text = json.dumps(data, ensure_ascii=False, indent=1)
        await anyio.to_thread.run_sync(atomic_write_text, self.path(channel, source_id), text)

    @staticmethod
    def _remove_sync(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def remove_sync(self, channel: str, source_id: str) -> None:
        """Drop the record (blocking); one that is already gone is not an error."""
        try:
            self._remove_sync(self.path(channel, source_id))
        except OSError as exc:
            raise StorageError(f"cannot remove {self._noun}: {exc.strerror or exc}") from exc

    async def remove(self, channel: str, source_id: str) -> None:
        """Drop the record; one that is already gone is not an error."""
        await anyio.to_thread.run_sync(self.remove_sync, channel, source_id)

    def _paths_sync(self) -> list[Path]:
        try:
            return sorted(p for p in self._dir.iterdir() if p.suffix == ".json")
        except FileNotFoundError:
            return []

    async def count(self) -> int:
        return len(await anyio.to_thread.run_sync(self._paths_sync))

    async def names(self) -> set[str]:
        """The file names of the records there are now."""
        return {path.name for path in await anyio.to_thread.run_sync(self._paths_sync)}

    def _load_sync(self) -> list[T]:
        records: list[T] = []
        for path in self._paths_sync():
            try:
                records.append(self._decode(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, *_DECODE_ERRORS):
                # Left in place for a human to look at; never overwritten.
                log.warning(self._unreadable_event, path=str(path))
        return records

    async def load(self) -> list[T]:
        """Every readable record, by file name; an unreadable file is logged and skipped."""
        return await anyio.to_thread.run_sync(self._load_sync)
