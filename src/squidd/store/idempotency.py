"""Replies of the API channel kept by their `Idempotency-Key`, durable across restarts.

`<data dir>/api/idempotency/<safe name of "key id:idempotency key">.json`, one small record
per request, replaced atomically with fsync (`squidd.fs.atomic_write_text`) before the
channel reports the reply delivered: a retry with the same key after a crash or a restart
gets the stored reply and runs no second turn. A record older than the configured lifetime
(24 h by default) counts as absent and is removed by `sweep`. Peers keep such caches in
memory for minutes; a client that retries after a restart then pays for a second turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from squidd.store.json_dir import JsonDir
from squidd.store.records import Codec


@dataclass(frozen=True, slots=True)
class StoredReply:
    """The finished answer to one request: its completion id, model name and text."""

    completion_id: str
    model: str
    text: str
    created: float


REPLY: Codec[StoredReply] = Codec(StoredReply)


class IdempotencyDir:
    """`StoredReply` records by (key id, idempotency key), each kept `lifetime_s`."""

    def __init__(
        self,
        data_dir: Path,
        *,
        lifetime_s: float = 24 * 3600.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._dir = data_dir / "api" / "idempotency"
        self._records = JsonDir(self._dir, kind="stored_reply", decode=REPLY.load)
        self._lifetime_s = lifetime_s
        self._now = now

    async def get(self, key_id: str, idempotency_key: str) -> StoredReply | None:
        """The stored reply, None when there is none or it expired."""
        record = await self._records.get(key_id, idempotency_key)
        if record is None or self._now() - record.created > self._lifetime_s:
            return None
        return record

    async def put(
        self, key_id: str, idempotency_key: str, *, completion_id: str, model: str, text: str
    ) -> None:
        """Store the reply; durable (fsync of file and folder) when this returns."""
        reply = StoredReply(completion_id, model, text, created=self._now())
        await self._records.put(key_id, idempotency_key, REPLY.dump(reply))

    async def sweep(self) -> int:
        """Remove the expired records (by file time, no parsing); how many went."""
        return await anyio.to_thread.run_sync(self._sweep_sync)

    def _sweep_sync(self) -> int:
        cutoff = self._now() - self._lifetime_s
        removed = 0
        try:
            paths = list(self._dir.glob("*.json"))
        except OSError:
            return 0
        for path in paths:
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
        return removed
