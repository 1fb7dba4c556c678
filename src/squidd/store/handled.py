"""The record of handled messages: (channel, source id) pairs whose reply was delivered.

One JSON object per line in `<data dir>/gateway/handled.jsonl`, appended under a file lock
and fsynced before the source is acknowledged. It is read once at start into a set; entries
older than the retention period are dropped then (a source does not redeliver months-old
messages), with an atomic rewrite.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import structlog

from squidd.store.files import append_lines_locked, atomic_write_text, read_text_or_empty

log = structlog.get_logger()


class HandledFile:
    """Implements the router's `HandledLog` on one append-only file."""

    def __init__(self, data_dir: Path, *, retention: timedelta = timedelta(days=30)) -> None:
        self._path = data_dir / "gateway" / "handled.jsonl"
        self._retention = retention
        self._seen: set[tuple[str, str]] | None = None
        self._lock = anyio.Lock()

    @property
    def path(self) -> Path:
        return self._path

    def _load_sync(self) -> set[tuple[str, str]]:
        text = read_text_or_empty(self._path)
        cutoff = datetime.now(UTC) - self._retention
        kept: list[str] = []
        seen: set[tuple[str, str]] = set()
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
            seen.add(key)
            kept.append(line)
        if dropped:
            atomic_write_text(self._path, "".join(f"{line}\n" for line in kept))
            log.info("handled_compacted", kept=len(kept), dropped=dropped)
        return seen

    async def _ensure(self) -> set[tuple[str, str]]:
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

    async def add(self, channel: str, source_id: str) -> None:
        seen = await self._ensure()
        line = json.dumps(
            {"channel": channel, "id": source_id, "at": datetime.now(UTC).isoformat()},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        await anyio.to_thread.run_sync(append_lines_locked, self._path, [line])
        seen.add((channel, source_id))
