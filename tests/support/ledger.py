"""30 days of usage ledger and turn timings written before a `squidd run` starts, and the
bars the overview's charts must then draw from them (tokens and cost by model and by
channel, the cache-read share, turns, turn duration), computed here from the records, not
by the dashboard's code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from squidd.core.usage import UsageRecord
from squidd.fs import append_lines_locked
from squidd.store.timings import TIMING, TurnTiming
from squidd.store.usage import USAGE

DAYS = 30
PRICES = "\n[llm.prices]\nmodel-a = { input = 2.0, output = 8.0, cached_input = 0.5 }\n"
"""The config lines pricing model-a (model-b has no price: its calls cost nothing known)."""


def seeded(day: int, when: str) -> list[UsageRecord]:
    """Day `day` (0 = 29 days ago): a Matrix turn on model-a, an email step on model-b."""
    return [
        UsageRecord(
            when, "matrix:!room:hs", "model-a", "turn", 1000 * (day + 1), 100, 500 * day, 2
        ),
        UsageRecord(when, "email:bob@example.org", "model-b", "tool_step", 300 * (30 - day), 50),
    ]


def seed(data: Path) -> list[list[UsageRecord]]:
    today = datetime.now(UTC).date()
    days = []
    for n in range(DAYS):
        when = (today - timedelta(days=DAYS - 1 - n)).isoformat()
        records = seeded(n, when)
        append_lines_locked(data / "usage" / f"{when}.jsonl", [USAGE.dumps(r) for r in records])
        days.append(records)
    return days


def expected_bars(days: list[list[UsageRecord]]) -> dict[str, dict[tuple[str, str], float]]:
    def money(r: UsageRecord) -> float:
        if r.model != "model-a":
            return 0.0
        fresh = r.prompt_tokens - r.cached_tokens
        return (fresh * 2.0 + r.cached_tokens * 0.5 + r.completion_tokens * 8.0) / 1e6

    want: dict[str, dict[tuple[str, str], float]] = {
        "tokens-model": {},
        "tokens-channel": {},
        "cost-model": {},
        "cache": {},
        "turns": {},
    }
    for records in days:
        for r in records:
            channel = r.session.split(":")[0]
            want["tokens-model"][(r.day, r.model)] = r.total_tokens
            want["tokens-channel"][(r.day, channel)] = r.total_tokens
            if money(r):
                want["cost-model"][(r.day, r.model)] = money(r)
        day = records[0].day
        cached = sum(r.cached_tokens for r in records)
        if cached:
            want["cache"][(day, "cache read")] = (
                100 * cached / sum(r.prompt_tokens for r in records)
            )
        want["turns"][(day, "turns")] = sum(r.calls for r in records if r.purpose == "turn")
    return want


def seed_timings(data: Path) -> dict[str, list[TurnTiming]]:
    """Three turns a day for 30 days (one of them streamed), written as the daemon does."""
    today = datetime.now(UTC).date()
    days: dict[str, list[TurnTiming]] = {}
    for n in range(DAYS):
        when = (today - timedelta(days=DAYS - 1 - n)).isoformat()
        timings = [
            TurnTiming(when, "matrix:!room:hs", 1000 * (n + 1), 200 + 10 * n),
            TurnTiming(when, "email:bob@example.org", 9000),
            TurnTiming(when, "api:desk", 500),
        ]
        append_lines_locked(data / "timings" / f"{when}.jsonl", [TIMING.dumps(t) for t in timings])
        days[when] = timings
    return days


def expected_timing_bars(days: dict[str, list[TurnTiming]]) -> dict[tuple[str, str], float]:
    """The duration chart's segments: the median of the day's three turns, and from it up
    to the 90th percentile (of three, the nearest rank is the longest), in seconds."""
    want: dict[tuple[str, str], float] = {}
    for day, timings in days.items():
        _, middle, longest = sorted(t.duration_ms / 1000 for t in timings)
        want[(day, "median")] = middle
        if longest > middle:
            want[(day, "median to 90th percentile")] = longest - middle
    return want
