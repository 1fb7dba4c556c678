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


async def test_turns_finishing_together_share_one_write_and_every_line_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines recorded while another is being written go in the next write, all of them
    in one worker-thread call; each record returns once its own line is in the file."""
    import anyio

    import squidd.store.timings as timings

    writes: list[int] = []
    append_batch = timings._append_batch

    def counted(lines: list[tuple[Path, str]]) -> None:
        writes.append(len(lines))
        append_batch(lines)

    monkeypatch.setattr(timings, "_append_batch", counted)
    ledger = TimingsLedger(tmp_path)
    today = ledger.today()

    async def turn(number: int) -> None:
        await ledger.record(f"s{number}", number, None)
        recorded = await ledger.read(today)
        assert f"s{number}" in {timing.session for timing in recorded}

    async with anyio.create_task_group() as tg:
        for number in range(10):
            tg.start_soon(turn, number)
    assert sorted(t.duration_ms for t in await ledger.read(today)) == list(range(10))
    assert sum(writes) == 10
    assert len(writes) <= 2
