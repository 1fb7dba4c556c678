"""A manual clock for schedules: tests move time with `advance` instead of waiting for it.

`monotonic` and `sleep` are the same clock for code that takes those two."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio


class FakeClock:
    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
        self._start = self._now
        self._moved = anyio.Event()

    def now(self) -> datetime:
        return self._now

    async def sleep_until(self, when: datetime) -> None:
        while self._now < when:
            await self._moved.wait()

    def monotonic(self) -> float:
        """Seconds since the clock was made."""
        return (self._now - self._start).total_seconds()

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self._now + timedelta(seconds=seconds))

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        moved, self._moved = self._moved, anyio.Event()
        moved.set()
