"""How long turns took: one JSON line per answered turn, per local day, for the dashboard's
percentiles of turn duration and time to first token.

Files live in `<data dir>/timings/YYYY-MM-DD.jsonl` (the day in the ledger's timezone, like
the usage ledger's). A line is a `TurnTiming`: the day, the session, the turn's duration
from the start of its model work to its answer, and the time to the answer's first token
where the answer streams (a channel that shows it while written: Matrix edits, the
dashboard's chat), else null. Lines are only appended (whole, under a lock, without an
fsync each: a lost last line costs one point of a chart, never a message); a torn line is
skipped when read. The folder is small: one line per turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import anyio
import structlog

from squidd.fs import append_lines_locked
from squidd.store.records import Codec

__all__ = ["TIMING", "TimingsLedger", "TurnTiming"]

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class TurnTiming:
    day: str
    session: str
    duration_ms: int
    first_token_ms: int | None = None


TIMING: Codec[TurnTiming] = Codec(TurnTiming)
"""One line of a timings file: every field."""


def _read_day(path: Path) -> list[TurnTiming]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    found: list[TurnTiming] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            found.append(TIMING.loads(line))
        except (ValueError, KeyError, TypeError):
            log.warning("timing_line_unreadable", file=path.name, line=number)
    return found


def _append_batch(lines: list[tuple[Path, str]]) -> None:
    by_path: dict[Path, list[str]] = {}
    for path, line in lines:
        by_path.setdefault(path, []).append(line)
    for path, group in by_path.items():
        append_lines_locked(path, group, fsync=False)


class TimingsLedger:
    """The ledger's lines are group-committed: turns that finish while a line is being
    written wait for the next write, which takes all of theirs in one worker-thread call
    (a hand-off costs more CPU than the line). A record returns once its line is written."""

    def __init__(self, data_dir: Path, *, timezone: str = "UTC") -> None:
        self._dir = data_dir / "timings"
        self._tz = ZoneInfo(timezone)
        self._pending: list[tuple[Path, str]] = []
        self._next_written = anyio.Event()  # set when the pending lines were written
        self._writing = False

    def today(self) -> date:
        return datetime.now(UTC).astimezone(self._tz).date()

    async def record(self, session: str, duration_ms: int, first_token_ms: int | None) -> None:
        timing = TurnTiming(self.today().isoformat(), session, duration_ms, first_token_ms)
        path = self._dir / f"{timing.day}.jsonl"
        self._pending.append((path, TIMING.dumps(timing)))
        if self._writing:
            await self._next_written.wait()
            return
        self._writing = True
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                written, self._next_written = self._next_written, anyio.Event()
                try:
                    await anyio.to_thread.run_sync(_append_batch, batch)
                finally:
                    written.set()
        finally:
            self._writing = False
            # Cut short (cancelled, a full disk): whoever waits goes on; their lines are
            # written with the next record.
            self._next_written.set()
            self._next_written = anyio.Event()

    def _read(self, since: date) -> list[TurnTiming]:
        if not self._dir.is_dir():
            return []
        found: list[TurnTiming] = []
        for path in sorted(self._dir.glob("*.jsonl")):
            try:
                day = date.fromisoformat(path.stem)
            except ValueError:
                continue
            if day >= since:
                found.extend(_read_day(path))
        return found

    async def read(self, since: date) -> list[TurnTiming]:
        """Every turn's timing from the local day `since` on."""
        return await anyio.to_thread.run_sync(self._read, since)
