"""The usage of the last 30 days for the overview's charts, summed per day.

Each day is summed once into a `DaySums`: tokens and money by model (with its provider when
the records carry one), by channel (the session name's prefix, `api:desk` -> `api`) and,
when records carry them, by agent and by person; cached and prompt tokens (the cache-read
share); model calls of turns. A finished day never changes (the ledger appends only to
today; compacting a day keeps its sums), so its sums are kept in memory and a page reads
the files of a day at most once; today's sums are kept too and brought up to date with the
records the ledger added to its in-memory list since the last page. A page then adds up
only what is new, not 60,000 records of 1,000 sessions over 30 days.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta

from squidd.core.usage import Price, UsageRecord, cost_of
from squidd.fs import safe_name
from squidd.web.host import DashboardHost

DAYS = 30
CHANNEL = re.compile(r"^([a-z][a-z0-9_-]{0,30}):")
GROUPINGS = ("model", "channel", "agent", "person")
"""The breakdowns a day is summed by; agent and person show once records carry them."""


def channel_of(session: str) -> str:
    """The channel a session name starts with (`matrix:!room` -> `matrix`), else `other`."""
    found = CHANNEL.match(session)
    return found.group(1) if found else "other"


def _label(record: UsageRecord, grouping: str) -> str:
    if grouping == "model":
        provider = str(getattr(record, "provider", "") or "")
        return f"{provider}/{record.model}" if provider else record.model
    if grouping == "channel":
        return channel_of(record.session)
    return str(getattr(record, grouping, "") or "")


@dataclass(slots=True)
class DaySums:
    """One day's usage: tokens and money per label of each grouping, and the totals."""

    day: str
    tokens: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    cost: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    prompt_tokens: int = 0
    cached_tokens: int = 0
    turns: int = 0

    def add(self, record: UsageRecord, prices: Mapping[str, Price]) -> None:
        money = cost_of(record, prices)
        for grouping in GROUPINGS:
            label = _label(record, grouping)
            if not label:
                continue
            tokens, cost = self.tokens[grouping], self.cost[grouping]
            tokens[label] = tokens.get(label, 0) + record.total_tokens
            cost[label] = cost.get(label, 0.0) + money
        self.prompt_tokens += record.prompt_tokens
        self.cached_tokens += min(record.cached_tokens, record.prompt_tokens)
        if record.purpose == "turn":
            self.turns += record.calls


def sum_days(
    records: Iterable[UsageRecord], prices: Mapping[str, Price], days: Iterable[str]
) -> dict[str, DaySums]:
    sums = {day: DaySums(day) for day in days}
    for record in records:
        if (day := sums.get(record.day)) is not None:
            day.add(record, prices)
    return sums


class UsageDays:
    """The last `DAYS` days' sums, finished days kept once summed."""

    def __init__(self, host: DashboardHost) -> None:
        self._host = host
        self._done: dict[str, DaySums] = {}
        self._names: dict[str, str] = {}
        self._today = DaySums("")
        self._today_seen = 0  # today's records already in `_today` (the ledger appends)

    async def names(self) -> dict[str, str]:
        """Each session's name by its history file's name (`safe_name`), for the sessions
        whose history does not name them yet (a history's meta file is written at its first
        consolidation): every session that made a model call in the last `DAYS` days."""
        await self.last()
        return self._names

    def _learn(self, records: Iterable[UsageRecord]) -> None:
        for session in {r.session for r in records}:
            self._names.setdefault(safe_name(session), session)

    async def last(self, days: int = DAYS) -> list[DaySums]:
        """Oldest first, today last; a day without records has zero sums."""
        today = self._host.local_today()
        wanted = [(today - timedelta(days=n)).isoformat() for n in range(days - 1, -1, -1)]
        missing = [day for day in wanted[:-1] if day not in self._done]
        if missing:
            records = await self._host.usage_since(date.fromisoformat(missing[0]))
            past = [r for r in records if r.day in missing]
            self._learn(past)
            prices = self._host.prices({r.model for r in past})
            self._done |= sum_days(past, prices, missing)
        self._done = {day: sums for day, sums in self._done.items() if day in wanted}
        return [*(self._done[day] for day in wanted[:-1]), await self._now(wanted[-1])]

    async def _now(self, day: str) -> DaySums:
        """Today's sums, brought up to date with the records added since the last look
        (today's records only grow, in order, until the day turns)."""
        now = await self._host.usage_today()
        if self._today.day != day or len(now) < self._today_seen:
            self._today, self._today_seen = DaySums(day), 0
        new = [r for r in now[self._today_seen :] if r.day == day]
        self._learn(new)
        prices = self._host.prices({r.model for r in new})
        for record in new:
            self._today.add(record, prices)
        self._today_seen = len(now)
        return self._today
