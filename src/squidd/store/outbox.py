"""Finished replies waiting for delivery, one small JSON file each.

`<data dir>/gateway/outbox/<safe name of channel + source id>.json`, written atomically
before the reply is sent and removed once it was delivered. After a crash between the
model's turn and the delivery, the redelivered message finds its reply here and the same
text is sent without running the model again.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import anyio

from squidd.core.models import PendingReply
from squidd.errors import StorageError
from squidd.fs import atomic_write_text, read_text_or_empty, safe_name


class OutboxDir:
    """Implements the router's `Outbox` on a directory of atomically written files."""

    def __init__(self, data_dir: Path) -> None:
        self._dir = data_dir / "gateway" / "outbox"

    def _path(self, channel: str, source_id: str) -> Path:
        return self._dir / f"{safe_name(f'{channel}:{source_id}')}.json"

    def _get_sync(self, path: Path) -> PendingReply | None:
        text = read_text_or_empty(path)
        if not text:
            return None
        try:
            return PendingReply.from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageError(f"cannot read {path}: not a pending reply") from exc

    async def get(self, channel: str, source_id: str) -> PendingReply | None:
        return await anyio.to_thread.run_sync(self._get_sync, self._path(channel, source_id))

    async def put(self, channel: str, source_id: str, reply: PendingReply) -> None:
        data = {**reply.to_dict(), "source_channel": channel, "source_id": source_id}
        text = json.dumps(data, ensure_ascii=False, indent=1)
        await anyio.to_thread.run_sync(atomic_write_text, self._path(channel, source_id), text)

    def _remove_sync(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    async def remove(self, channel: str, source_id: str) -> None:
        try:
            await anyio.to_thread.run_sync(self._remove_sync, self._path(channel, source_id))
        except OSError as exc:
            raise StorageError(f"cannot remove an outbox entry: {exc.strerror or exc}") from exc

    def _count_sync(self) -> int:
        try:
            return sum(1 for p in self._dir.iterdir() if p.suffix == ".json")
        except FileNotFoundError:
            return 0

    async def count(self) -> int:
        """Replies waiting for delivery (shown by `squidd status`)."""
        return await anyio.to_thread.run_sync(self._count_sync)
