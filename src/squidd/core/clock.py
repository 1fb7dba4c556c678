"""The system clock that schedules run on (the `Clock` port's real implementation).

The cron scheduler and the heartbeat take a `squidd.core.ports.Clock`, so tests move time
instead of waiting for it; this is the one the daemon uses.
"""

from __future__ import annotations

from datetime import UTC, datetime

import anyio


class SystemClock:
    """The real clock; sleeps in slices so a wall-clock jump (suspend, NTP) is noticed."""

    def __init__(self, max_slice_s: float = 30.0) -> None:
        self._max_slice_s = max_slice_s

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime) -> None:
        while True:
            delta = (when - self.now()).total_seconds()
            if delta <= 0:
                return
            await anyio.sleep(min(delta, self._max_slice_s))
