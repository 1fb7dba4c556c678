"""The usage ledger: every model call's reported tokens, one JSON line per call, per day.

Files live in `<data dir>/usage/YYYY-MM-DD.jsonl`, the day being the local date in the
configured timezone (so "today" and the daily caps turn over at local midnight). Lines are
only ever appended (under a lock, whole lines); a day that is over is compacted once into
one line per (session, model, purpose) with a `calls` count, written atomically, so a year
of history stays a few hundred lines a day at most. Reading sums lines, so a compacted and
an uncompacted day read the same. Today's totals are kept in memory as well (loaded once),
because the caps ask for them on every turn: summed per key (session, model, purpose, ...)
as a compacted day reads, so the memory they take grows with the sessions and models of
the day, not with its calls (a list of every call's record grew the daemon by 6.7 MiB over
18,000 turns in 200 sessions: docs/performance.md, P6).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TypeVar
from zoneinfo import ZoneInfo

import anyio
import structlog

from squidd.core.usage import Failover, UsageKey, UsageRecord, add_up, compact
from squidd.fs import append_lines_locked, atomic_write_text
from squidd.store.records import Codec

FAILOVER: Codec[Failover] = Codec(Failover, keys={"from_": "from"})
"""One line of the day's fall-overs (`usage/failovers/YYYY-MM-DD.jsonl`)."""

USAGE: Codec[UsageRecord] = Codec(
    UsageRecord,
    keys={"prompt_tokens": "prompt", "completion_tokens": "completion", "cached_tokens": "cached"},
)
"""One ledger line (the token counts under the short keys the files always had)."""

log = structlog.get_logger()

T = TypeVar("T")


def _read_lines(path: Path, codec: Codec[T], unreadable: str) -> list[T]:
    """The records of one JSON-lines file (none when it is missing); an unreadable line is
    skipped with the warning event `unreadable`, naming the file and the line."""
    records: list[T] = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return records
    # "\n" only: a JSON line may hold U+0085 or U+2028, which `splitlines` breaks at.
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            records.append(codec.loads(line))
        except (ValueError, KeyError, TypeError):
            log.warning(unreadable, file=path.name, line=number)
    return records


def _read_day(path: Path) -> list[UsageRecord]:
    return _read_lines(path, USAGE, "usage_line_unreadable")


class UsageLedger:
    """Append-only usage records by local day; a `UsageSink` for the core."""

    def __init__(
        self, data_dir: Path, *, timezone: str = "UTC", now: Callable[[], datetime] | None = None
    ) -> None:
        self._dir = data_dir / "usage"
        self._tz = ZoneInfo(timezone)
        self._now = now
        self._today: str | None = None
        # Today's records summed by `UsageRecord.key()`, in order of first appearance.
        self._today_sums: dict[UsageKey, UsageRecord] = {}

    def today(self) -> str:
        moment = self._now() if self._now is not None else datetime.now(UTC)
        return moment.astimezone(self._tz).date().isoformat()

    def _path(self, day: str) -> Path:
        return self._dir / f"{day}.jsonl"

    async def record(
        self,
        *,
        session: str,
        model: str,
        purpose: str,
        prompt: int,
        completion: int,
        cached: int,
        provider: str = "",
        agent: str = "",
        person: str = "",
    ) -> None:
        day = self.today()
        record = UsageRecord(
            day,
            session,
            model,
            purpose,
            prompt,
            completion,
            cached,
            provider=provider,
            agent=agent,
            person=person,
        )
        await self._load_today(day)
        line = USAGE.dumps(record)
        await anyio.to_thread.run_sync(lambda: append_lines_locked(self._path(day), [line]))
        if self._today == day:  # else today is a new day: the line is in its own day's file
            key = record.key()
            seen = self._today_sums.get(key)
            self._today_sums[key] = record if seen is None else add_up(seen, record)

    async def failed_over(self, failover: Failover) -> None:
        """Keep one fall-over of the provider chain in today's list."""
        path = self._dir / "failovers" / f"{self.today()}.jsonl"
        line = FAILOVER.dumps(failover)
        await anyio.to_thread.run_sync(lambda: append_lines_locked(path, [line]))

    async def failovers(self, since: date | None = None) -> list[Failover]:
        """The fall-overs from `since` (a local day, inclusive; None: today) on, oldest first."""
        start = since or date.fromisoformat(self.today())
        return await anyio.to_thread.run_sync(self._read_failovers, start)

    def _read_failovers(self, since: date) -> list[Failover]:
        folder = self._dir / "failovers"
        if not folder.is_dir():
            return []
        found: list[Failover] = []
        for path in sorted(folder.glob("*.jsonl")):
            try:
                day = date.fromisoformat(path.stem)
            except ValueError:
                continue
            if day >= since:
                found.extend(_read_lines(path, FAILOVER, "failover_line_unreadable"))
        return found

    async def _load_today(self, day: str) -> None:
        if self._today == day:
            return
        records = await anyio.to_thread.run_sync(_read_day, self._path(day))
        self._today, self._today_sums = day, {r.key(): r for r in compact(records)}

    async def today_records(self) -> list[UsageRecord]:
        """Everything recorded today (local day), as a compacted day reads: one record per
        key with its `calls` count. What the caps and `status` look at."""
        await self._load_today(self.today())
        return list(self._today_sums.values())

    async def read(self, since: date | None = None) -> list[UsageRecord]:
        """All records from `since` (a local day, inclusive) on; everything when None."""
        return await anyio.to_thread.run_sync(self._read_all, since)

    def _read_all(self, since: date | None) -> list[UsageRecord]:
        if not self._dir.is_dir():
            return []
        records: list[UsageRecord] = []
        for path in sorted(self._dir.glob("*.jsonl")):
            try:
                day = date.fromisoformat(path.stem)
            except ValueError:
                continue
            if since is None or day >= since:
                records.extend(_read_day(path))
        return records

    async def compact_past_days(self) -> int:
        """Rewrite every finished day as one line per key; returns the days compacted."""
        return await anyio.to_thread.run_sync(self._compact_past, self.today())

    def _compact_past(self, today: str) -> int:
        if not self._dir.is_dir():
            return 0
        done = 0
        for path in sorted(self._dir.glob("*.jsonl")):
            if path.stem >= today:
                continue
            records = _read_day(path)
            merged = compact(records)
            if len(merged) == len(records):
                continue
            text = "".join(USAGE.dumps(r) + "\n" for r in merged)
            atomic_write_text(path, text)
            done += 1
        if done:
            log.info("usage_compacted", days=done)
        return done
