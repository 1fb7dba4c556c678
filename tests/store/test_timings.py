"""The turn timings ledger: a record read back is the record written, whole (a turn with a
first token and one without); a torn line is skipped; only days from `since` are read."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from squidd.store.timings import TIMING, TimingsLedger, TurnTiming

pytestmark = pytest.mark.anyio


async def test_records_round_trip_whole_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    ledger = TimingsLedger(tmp_path)
    today = ledger.today()
    await ledger.record("matrix:!room:hs", 1520, 230)
    await ledger.record("email:bob@example.org", 8000, None)
    path = tmp_path / "timings" / f"{today.isoformat()}.jsonl"
    with path.open("a") as handle:
        handle.write('{"day": "torn')
    old = TurnTiming((today - timedelta(days=40)).isoformat(), "api:desk", 10)
    (tmp_path / "timings" / f"{old.day}.jsonl").write_text(TIMING.dumps(old) + "\n")
    assert await ledger.read(today - timedelta(days=29)) == [
        TurnTiming(today.isoformat(), "matrix:!room:hs", 1520, 230),
        TurnTiming(today.isoformat(), "email:bob@example.org", 8000, None),
    ]
    assert (await ledger.read(today - timedelta(days=40)))[0] == old
