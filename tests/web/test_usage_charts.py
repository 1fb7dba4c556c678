"""The overview's charts, drawn from 30 days of ledger seeded before `squidd run` starts:
every bar's value is the ledger's sum for its day and label (tokens and cost by model and
by channel, the cache-read share, turns), and its height is that value over the tallest
day's, on the drawn plot; each cap is a bar filled to used / limit."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from squidd.core.usage import UsageRecord
from squidd.store.timings import TurnTiming
from tests.channels.api.support import ApiDaemon
from tests.support.dashboard import log_in, shell_api_daemon
from tests.support.fake_llm import FakeLLM
from tests.support.ledger import (
    DAYS,
    PRICES,
    expected_bars,
    expected_timing_bars,
    seed,
    seed_timings,
)

pytestmark = pytest.mark.anyio
PLOT = 166.0  # the drawn plot's height: the axis lines at y=10 and y=176 of 200


@pytest.fixture
async def seeded_api(
    tmp_path: Path, fake_llm: FakeLLM
) -> AsyncIterator[tuple[ApiDaemon, list[list[UsageRecord]], dict[str, list[TurnTiming]]]]:
    daemon = shell_api_daemon(tmp_path, fake_llm.base_url)
    days = seed(tmp_path / "data")
    timings = seed_timings(tmp_path / "data")
    with (tmp_path / "config.toml").open("a") as config:
        config.write(PRICES + "\n[limits]\ndaily_tokens = 100000\n")
    try:
        await daemon.start()
        yield daemon, days, timings
    finally:
        daemon.close()


class _Bars(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.chart = ""
        self.bars: dict[str, list[dict[str, str]]] = {}
        self.caps: dict[str, list[float]] = {}
        self._cap = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "svg" and "data-chart" in found:
            self.chart = found["data-chart"]
            self.bars[self.chart] = []
        elif tag == "svg" and "data-cap" in found:
            self._cap = found["data-cap"]
            self.caps[self._cap] = []
        elif tag == "rect" and "data-value" in found:
            self.bars[self.chart].append(found)
        elif tag == "rect" and self._cap:
            self.caps[self._cap].append(float(found["width"]))


async def test_the_bars_are_the_ledger_s_sums_and_their_heights_match(
    seeded_api: tuple[ApiDaemon, list[list[UsageRecord]], dict[str, list[TurnTiming]]],
) -> None:
    api, days, timings = seeded_api
    async with api.http() as http:
        await log_in(http, api.key)
        home = (await http.get("/")).text
    parsed = _Bars()
    parsed.feed(home)
    charts = {**expected_bars(days), "duration": expected_timing_bars(timings)}
    for chart, want in charts.items():
        bars = parsed.bars[chart]
        got = {(b["data-day"], b["data-label"]): float(b["data-value"]) for b in bars}
        assert got.keys() == want.keys(), chart
        for key, value in want.items():
            assert got[key] == pytest.approx(value), (chart, key)
        totals: dict[str, float] = {}
        for (day, _), value in want.items():
            totals[day] = totals.get(day, 0.0) + value
        top = 100.0 if chart == "cache" else max(totals.values())
        for bar in bars:
            expected = float(bar["data-value"]) / top * PLOT
            assert float(bar["height"]) == pytest.approx(expected, abs=0.01), (chart, bar)
    assert len({b["data-day"] for b in parsed.bars["turns"]}) == DAYS
    today = days[-1]
    used = sum(r.total_tokens for r in today)
    [(scope, widths)] = parsed.caps.items()
    assert widths == [600.0, pytest.approx(used / 100000 * 600, abs=0.01)], (scope, widths)
    assert re.search(rf"{scope}: {used:,} of 100,000", home), home
