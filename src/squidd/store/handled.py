"""The record of handled messages: (channel, source id) pairs whose reply was delivered, or
was refused for good (those lines carry `"failed": true`, so a redelivery is not acknowledged
as answered).

One JSON object per line in `<data dir>/gateway/handled.jsonl`, appended under a file lock
and fsynced before the source is acknowledged. It is read once at start into memory; entries
older than the retention period are dropped then (a source does not redeliver months-old
messages), with an atomic rewrite, and again about once a day while the daemon runs, so
neither the file nor the memory grows with uptime.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import structlog

from squidd.fs import append_lines_locked, atomic_write_text, read_text_or_empty

log = structlog.get_logger()

COMPACT_EVERY = timedelta(days=1)


def _now() -> datetime:
    return datetime.now(UTC)


def _line(channel: str, source_id: str, at: datetime, *, failed: bool = False) -> str:
    entry: dict[str, object] = {"channel": channel, "id": source_id, "at": at.isoformat()}
    if failed:
        entry["failed"] = True
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


class HandledFile:
    """Implements the router's `HandledLog` on one append-only file."""

    def __init__(
        self,
        data_dir: Path,
        *,
        retention: timedelta = timedelta(days=30),
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self._path = data_dir / "gateway" / "handled.jsonl"
        self._retention = retention
        self._clock = clock
        self._seen: dict[tuple[str, str], datetime] | None = None
        # The few entries whose reply was refused for good.
        self._failed: set[tuple[str, str]] = set()
        self._lock = anyio.Lock()
        self._compacted_at = clock()

    @property
    def path(self) -> Path:
        return self._path

    def _load_sync(self) -> dict[tuple[str, str], datetime]:
        text = read_text_or_empty(self._path)
        cutoff = self._clock() - self._retention
        kept: list[str] = []
        seen: dict[tuple[str, str], datetime] = {}
        dropped = 0
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                key = (str(entry["channel"]), str(entry["id"]))
                at = datetime.fromisoformat(str(entry["at"]))
                if at.tzinfo is None:
                    at = at.replace(tzinfo=UTC)
            except (ValueError, KeyError, TypeError):
                log.warning("handled_line_skipped", path=str(self._path), reason="unreadable")
                dropped += 1
                continue
            if at < cutoff:
                dropped += 1
                continue
            seen[key] = at
            if entry.get("failed") is True:
                self._failed.add(key)
            kept.append(line)
        if dropped:
            atomic_write_text(self._path, "".join(f"{line}\n" for line in kept))
            log.info("handled_compacted", kept=len(kept), dropped=dropped)
        return seen

    async def _ensure(self) -> dict[tuple[str, str], datetime]:
        if self._seen is None:
            async with self._lock:
                if self._seen is None:
                    self._seen = await anyio.to_thread.run_sync(self._load_sync)
        return self._seen

    async def load(self) -> int:
        """Read the file now (at start-up, so the first message does not pay for it)."""
        return len(await self._ensure())

    async def contains(self, channel: str, source_id: str) -> bool:
        return (channel, source_id) in await self._ensure()

    async def failed(self, channel: str, source_id: str) -> bool:
        await self._ensure()
        return (channel, source_id) in self._failed

    async def add(self, channel: str, source_id: str, *, failed: bool = False) -> None:
        seen = await self._ensure()
        now = self._clock()
        line = _line(channel, source_id, now, failed=failed)
        async with self._lock:
            await anyio.to_thread.run_sync(append_lines_locked, self._path, [line])
            seen[(channel, source_id)] = now
            if failed:
                self._failed.add((channel, source_id))
            if now - self._compacted_at >= COMPACT_EVERY:
                await self._compact(seen, now)

    async def _compact(self, seen: dict[tuple[str, str], datetime], now: datetime) -> None:
        """Drop expired entries from memory and the file (the caller holds the lock)."""
        self._compacted_at = now
        cutoff = now - self._retention
        expired = [key for key, at in seen.items() if at < cutoff]
        if not expired:
            return
        for key in expired:
            del seen[key]
            self._failed.discard(key)
        text = "".join(
            f"{_line(ch, sid, at, failed=(ch, sid) in self._failed)}\n"
            for (ch, sid), at in seen.items()
        )
        await anyio.to_thread.run_sync(atomic_write_text, self._path, text)
        log.info("handled_compacted", kept=len(seen), dropped=len(expired))
