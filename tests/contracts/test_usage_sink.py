"""The usage-sink contract (`core.usage.UsageSink`, plus the reads the caps, `status` and
`squidd usage` make) over the file ledger: every recorded call is read back exactly, by a
new instance too (the daemon restarts); today's records are summed per key, as a compacted
day reads; concurrent records all land as whole lines, a damaged line costs only itself,
and `since` is inclusive. No test uses a double of this port, so the suite runs over the
files only."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import anyio
import pytest

from squidd.core.usage import UsageRecord, UsageSink, compact
from squidd.store.usage import UsageLedger

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self, when: datetime) -> None:
        self.when = when

    def __call__(self) -> datetime:
        return self.when


def ledger_at(tmp_path: Path, clock: Clock) -> UsageLedger:
    return UsageLedger(tmp_path, timezone="UTC", now=clock)


async def record(sink: UsageSink, session: str, prompt: int, *, purpose: str = "turn") -> None:
    await sink.record(
        session=session, model="m", purpose=purpose, prompt=prompt, completion=1, cached=0
    )


async def test_records_read_back_exactly_also_after_a_restart(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 5, 4, 12, tzinfo=UTC))
    ledger = ledger_at(tmp_path, clock)
    await record(ledger, "a", 10)
    await record(ledger, "b", 20, purpose="heartbeat")
    expected = [
        UsageRecord("2026-05-04", "a", "m", "turn", 10, 1),
        UsageRecord("2026-05-04", "b", "m", "heartbeat", 20, 1),
    ]
    assert await ledger.today_records() == expected
    again = ledger_at(tmp_path, clock)
    assert await again.today_records() == expected
    assert await again.read() == expected


async def test_today_is_summed_per_key_as_a_compacted_day_reads(tmp_path: Path) -> None:
    # The caps read today's records on every turn: one per key, not one per call, so a
    # busy day costs neither memory nor time per call.
    clock = Clock(datetime(2026, 5, 4, 12, tzinfo=UTC))
    ledger = ledger_at(tmp_path, clock)
    for n in range(1, 301):
        await record(ledger, f"s{n % 2}", n, purpose="turn" if n % 3 else "consolidation")
    expected = compact(await ledger.read())
    assert len(expected) == 4
    assert await ledger.today_records() == expected
    assert sum(r.calls for r in expected) == 300
    assert sum(r.prompt_tokens for r in expected) == 300 * 301 // 2
    assert await ledger_at(tmp_path, clock).today_records() == expected
    clock.when = datetime(2026, 5, 5, 12, tzinfo=UTC)
    assert await ledger.compact_past_days() == 1
    assert await ledger.read(date(2026, 5, 4)) == expected
    assert await ledger.today_records() == []


async def test_concurrent_records_all_land(tmp_path: Path) -> None:
    ledger = ledger_at(tmp_path, Clock(datetime(2026, 5, 4, 12, tzinfo=UTC)))
    async with anyio.create_task_group() as tg:
        for n in range(40):
            tg.start_soon(record, ledger, f"s{n % 4}", n)
    fresh = await ledger_at(tmp_path, Clock(datetime(2026, 5, 4, 13, tzinfo=UTC))).read()
    assert sorted(r.prompt_tokens for r in fresh) == list(range(40))


async def test_a_damaged_line_costs_only_itself(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 5, 4, 12, tzinfo=UTC))
    await record(ledger_at(tmp_path, clock), "a", 10)
    with (tmp_path / "usage" / "2026-05-04.jsonl").open("a") as file:
        file.write('{"day": "2026-05-04", "sess')  # a write cut short
    ledger = ledger_at(tmp_path, clock)
    await record(ledger, "a", 5)
    assert [r.prompt_tokens for r in await ledger.read()] == [10, 5]
    assert [(r.prompt_tokens, r.calls) for r in await ledger.today_records()] == [(15, 2)]


async def test_since_is_inclusive_and_by_local_day(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 5, 3, 12, tzinfo=UTC))
    ledger = ledger_at(tmp_path, clock)
    await record(ledger, "a", 1)
    clock.when = datetime(2026, 5, 4, 12, tzinfo=UTC)
    await record(ledger, "a", 2)
    assert [r.prompt_tokens for r in await ledger.read(date(2026, 5, 4))] == [2]
    assert [r.prompt_tokens for r in await ledger.read(date(2026, 5, 3))] == [1, 2]
    assert [r.day for r in await ledger.today_records()] == ["2026-05-04"]
