"""`squidd usage` on the command line: today's totals, then one line per session (or per
model, purpose, day), read from the ledger the daemon writes."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from squidd.cli import main
from squidd.store.usage import UsageLedger
from tests.support.cli import logging_back_to_defaults as logging_back_to_defaults
from tests.support.config import data_dir_config


def _config(tmp_path: Path) -> Path:
    return data_dir_config(tmp_path, **{"llm.prices": {"m1": {"input": 2.0, "output": 8.0}}})


async def _fill(data: Path) -> None:
    ledger = UsageLedger(data)
    await ledger.record(
        session="room-a", model="m1", purpose="turn", prompt=1000, completion=50, cached=0
    )
    await ledger.record(
        session="room-a", model="m1", purpose="tool_step", prompt=3000, completion=20, cached=0
    )
    await ledger.record(
        session="heartbeat", model="m2", purpose="heartbeat", prompt=500, completion=5, cached=0
    )


def test_usage_today_then_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    anyio.run(_fill, tmp_path / "data")
    assert main(["usage", "--config", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("today") and "total       4575" in lines[0]
    assert "cost 0.0086" in lines[0]  # 4000 * 2 + 70 * 8 per million; m2 has no price
    assert lines[1] == "by session:"
    assert lines[2].split()[0] == "room-a" and lines[3].split()[0] == "heartbeat"

    assert main(["usage", "--by", "purpose", "--since", "7d", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("since ")
    assert [line.split()[0] for line in out.splitlines()[2:-1]] == [
        "tool_step",
        "turn",
        "heartbeat",
    ]
    assert out.splitlines()[-1].startswith("no price known for m2:")


def test_usage_rejects_a_bad_since(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "--since", "last week", "--config", str(_config(tmp_path))]) == 2


async def _fill_known(data: Path) -> None:
    ledger = UsageLedger(data)
    await ledger.record(
        session="room-a",
        model="gpt-4o-mini",
        purpose="turn",
        prompt=1_000_000,
        completion=0,
        cached=0,
    )
    await ledger.record(
        session="room-b", model="my-local-model", purpose="turn", prompt=500, completion=5, cached=0
    )


def test_usage_prices_a_known_model_from_the_price_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No `[llm.prices]`: a model the maintained table knows is priced from it; one it does
    not know is named, with the key that would price it."""
    config = data_dir_config(tmp_path)
    anyio.run(_fill_known, tmp_path / "data")
    assert main(["usage", "--by", "model", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    [known] = [line for line in out.splitlines() if line.split()[0] == "gpt-4o-mini"]
    assert "cost 0.1500" in known  # a million input tokens at the table's $0.15
    assert "no price known for my-local-model" in out
    assert '[llm.prices."MODEL"]' in out


def test_configured_prices_win_over_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = data_dir_config(tmp_path, **{"llm.prices": {"gpt-4o-mini": {"input": 1.0}}})
    anyio.run(_fill_known, tmp_path / "data")
    assert main(["usage", "--by", "model", "--config", str(config)]) == 0
    [known] = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  gpt-4o")]
    assert "cost 1.0000" in known
