"""The record of handled messages: (channel, source id) pairs that are done.

Done means the reply was delivered, or (`"failed": true` on the line) it was refused for
good and the source was told so; a redelivery of a failed one is given up again, never
answered.

One JSON object per line in `<data dir>/gateway/handled.jsonl`, appended under a file lock
and fsynced before the source is acknowledged. It is read once at start into memory; entries
older than the retention period are dropped then (a source does not redeliver months-old
messages), with an atomic rewrite, and again about once a day while the daemon runs, so
neither the file nor the memory grows with uptime.

The record is also bounded by count: only the newest `max_entries` ids are kept. A busy
month would otherwise keep every id of the month in memory. A redelivery comes from a crash
between recording a reply and acknowledging its source, so it concerns the newest few ids,
never one ten thousand messages back. In memory the oldest ids are dropped in place once
there are a tenth more than that (no table or file is rebuilt then: those peaks, every
thousand messages, would fragment the heap and cost more RSS than they save); the file is
cut to the same count by the daily compaction and at start. In memory an entry is one string
key and a float: about 110 bytes for a short id, where a tuple of two strings and a
datetime took 190.

What else is kept for a message only until it is done (its outbox entry, its attempt count:
`Leftover`s given to the constructor) is dropped in the same worker-thread call that appends
its line, right after the line is durable, in the order the settlement drops them
(core/settlement.py, which still asks each store to drop it and then finds nothing left).
A message's settlement then ends with one hand-off to a worker thread, not three.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Protocol

import anyio
import structlog

from squidd.fs import append_lines_locked, atomic_write_text, read_text_or_empty
from squidd.store.records import Codec, Moment

log = structlog.get_logger()

COMPACT_EVERY = timedelta(days=1)
MAX_ENTRIES = 10_000


def _key(channel: str, source_id: str) -> str:
    # A NUL cannot occur in a channel name, so distinct pairs never share a key.
    return f"{channel}\0{source_id}"


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Handled:
    """One line of the record: a message done at `at`; `failed`: its reply was refused."""

    channel: str
    id: str
    at: datetime
    failed: bool = False


HANDLED: Codec[Handled] = Codec(Handled, fields={"at": Moment}, omit_defaults=True)
"""A line (`failed` only where it is true, as the lines always were)."""


def _line(channel: str, source_id: str, at: datetime, *, failed: bool = False) -> str:
    return HANDLED.dumps(Handled(channel, source_id, at, failed))


def _line_of(key: str, at: float, *, failed: bool) -> str:
    channel, _, source_id = key.partition("\0")
    return _line(channel, source_id, datetime.fromtimestamp(at, UTC), failed=failed)


class Leftover(Protocol):
    """A store of what is kept for a message until it is handled (see the module)."""

    def leftover(self, channel: str, source_id: str) -> Callable[[], None] | None:
        """A blocking call that drops what is kept for the message; None: nothing is."""
        ...

    def dropped(self, channel: str, source_id: str) -> None:
        """That call ran: forget it in memory too."""
        ...


class HandledFile:
    """Implements `core.ports.HandledLog` on one append-only file."""

    def __init__(
        self,
        data_dir: Path,
        *,
        retention: timedelta = timedelta(days=30),
        clock: Callable[[], datetime] = _now,
        max_entries: int = MAX_ENTRIES,
        leftovers: Sequence[Leftover] = (),
    ) -> None:
        if max_entries <= 0:
            raise ValueError("max_entries must be > 0")
        self._path = data_dir / "gateway" / "handled.jsonl"
        self._retention = retention
        self._clock = clock
        self._max_entries = max_entries
        self._slack = max(1, max_entries // 10)
        # Key `_key(channel, id)` -> POSIX time it was recorded; insertion order is age order.
        self._seen: dict[str, float] | None = None
        # The keys of the few entries whose reply was refused for good.
        self._failed: set[str] = set()
        self._lock = anyio.Lock()
        self._compacted_at = clock()
        self._leftovers = tuple(leftovers)

    @property
    def path(self) -> Path:
        return self._path

    def _load_sync(self) -> dict[str, float]:
        text = read_text_or_empty(self._path)
        cutoff = self._clock() - self._retention
        kept: list[str] = []
        seen: dict[str, float] = {}
        failed: set[str] = set()
        dropped = 0
        # "\n" only: an id may hold U+0085 or U+2028, which `splitlines` breaks at.
        for line in text.split("\n"):
            if not line.strip():
                continue
            try:
                entry = HANDLED.loads(line)
            except ValueError:
                log.warning("handled_line_skipped", path=str(self._path), reason="unreadable")
                dropped += 1
                continue
            if entry.at < cutoff:
                dropped += 1
                continue
            key = _key(entry.channel, entry.id)
            seen.pop(key, None)  # a repeated id counts once, at its newest place
            seen[key] = entry.at.timestamp()
            if entry.failed:
                failed.add(key)
            kept.append(line)
        if len(seen) > self._max_entries:
            dropped += len(kept) - self._max_entries
            seen = dict(list(seen.items())[-self._max_entries :])
            kept = kept[-self._max_entries :]
        self._failed = failed & seen.keys()
        if dropped:
            atomic_write_text(self._path, "".join(f"{line}\n" for line in kept))
            log.info("handled_compacted", kept=len(kept), dropped=dropped)
        return seen

    async def _ensure(self) -> dict[str, float]:
        if self._seen is None:
            async with self._lock:
                if self._seen is None:
                    self._seen = await anyio.to_thread.run_sync(self._load_sync)
        return self._seen

    async def load(self) -> int:
        """Read the file now (at start-up, so the first message does not pay for it)."""
        return len(await self._ensure())

    async def contains(self, channel: str, source_id: str) -> bool:
        return _key(channel, source_id) in await self._ensure()

    async def failed(self, channel: str, source_id: str) -> bool:
        await self._ensure()
        return _key(channel, source_id) in self._failed

    async def add(self, channel: str, source_id: str, *, failed: bool = False) -> None:
        await self._ensure()
        now = self._clock()
        line = _line(channel, source_id, now, failed=failed)
        drops = [(kept, kept.leftover(channel, source_id)) for kept in self._leftovers]
        async with self._lock:
            await anyio.to_thread.run_sync(self._append_sync, line, [d for _, d in drops if d])
            for kept, drop in drops:
                if drop is not None:
                    kept.dropped(channel, source_id)
            # Read under the lock: a compaction may have replaced the table meanwhile.
            seen = await self._ensure()
            key = _key(channel, source_id)
            seen.pop(key, None)
            seen[key] = now.timestamp()
            if failed:
                self._failed.add(key)
            if now - self._compacted_at >= COMPACT_EVERY:
                await self._compact(seen, now)
            elif len(seen) > self._max_entries + self._slack:
                # Insertion order is age order: the oldest are first.
                for old in list(islice(seen, len(seen) - self._max_entries)):
                    del seen[old]
                    self._failed.discard(old)

    def _append_sync(self, line: str, drops: Sequence[Callable[[], None]]) -> None:
        append_lines_locked(self._path, [line])
        for drop in drops:
            drop()

    async def _compact(self, seen: dict[str, float], now: datetime) -> None:
        """Drop expired entries, and the oldest beyond `max_entries`, from memory and the
        file (the caller holds the lock)."""
        self._compacted_at = now
        cutoff = (now - self._retention).timestamp()
        items = [(key, at) for key, at in seen.items() if at >= cutoff]
        items = items[-self._max_entries :]
        dropped = len(seen) - len(items)
        if not dropped:
            return
        # A new dict rather than deletions in place: the old table's memory is given back.
        self._seen = kept = dict(items)
        self._failed &= kept.keys()
        text = "".join(
            f"{_line_of(key, at, failed=key in self._failed)}\n" for key, at in kept.items()
        )
        await anyio.to_thread.run_sync(atomic_write_text, self._path, text)
        log.info("handled_compacted", kept=len(kept), dropped=dropped)
