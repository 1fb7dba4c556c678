"""Turn duration and time to first token per day, as the median and the 90th percentile,
for the overview's charts (from store/timings.py, through the host).

Like the usage sums, a finished day is computed once and kept (only today's file grows);
today's percentiles are computed again on each page from today's lines alone. The
percentile is the nearest rank (the value a turn actually took), so a day of one turn
shows that turn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from squidd.store.timings import TurnTiming
from squidd.web.host import DashboardHost
from squidd.web.usage_days import DAYS


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile of `values` (not empty), `share` in (0, 1]."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass(frozen=True, slots=True)
class DayTimes:
    day: str
    duration: tuple[float, float] | None  # (median, p90) in seconds; None: no turn
    first_token: tuple[float, float] | None  # the same, of the turns whose answer streamed


def day_times(day: str, timings: Sequence[TurnTiming]) -> DayTimes:
    def spread(values: list[float]) -> tuple[float, float] | None:
        if not values:
            return None
        return percentile(values, 0.5), percentile(values, 0.9)

    durations = [t.duration_ms / 1000 for t in timings if t.day == day]
    firsts = [
        t.first_token_ms / 1000 for t in timings if t.day == day and t.first_token_ms is not None
    ]
    return DayTimes(day, spread(durations), spread(firsts))


class TimingDays:
    def __init__(self, host: DashboardHost) -> None:
        self._host = host
        self._done: dict[str, DayTimes] = {}

    async def last(self, days: int = DAYS) -> list[DayTimes]:
        today = self._host.local_today()
        wanted = [(today - timedelta(days=n)).isoformat() for n in range(days - 1, -1, -1)]
        missing = [day for day in wanted[:-1] if day not in self._done]
        if missing:
            read = await self._host.timings_since(today - timedelta(days=days - 1))
            self._done |= {day: day_times(day, read) for day in missing}
        self._done = {day: times for day, times in self._done.items() if day in wanted}
        now = day_times(wanted[-1], await self._host.timings_since(today))
        return [*(self._done[day] for day in wanted[:-1]), now]
