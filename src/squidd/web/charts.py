"""The overview's charts as numbers for SVG: stacked bars per day, and caps as bars that
fill toward their limit.

Everything is computed here and drawn by a template (pages/charts.html) as SVG on the
server: no script, and every label escaped like any other value. A bar's height is its
value over the tallest day's total, times the plot's height, so a test can read a rect's
`data-value` and height and check both against the ledger. A breakdown keeps its
`SERIES - 1` largest labels and sums the rest into "other", so a chart stays readable
with many models or channels; colours are the Okabe-Ito palette, told apart by people
with any common colour blindness, and each bar has a `<title>` and each chart a table of
its numbers for a screen reader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from squidd.web.timing_days import DayTimes
from squidd.web.usage_days import DaySums

WIDTH, HEIGHT = 600.0, 200.0
LEFT, RIGHT, TOP, BOTTOM = 48.0, 8.0, 10.0, 24.0
PLOT_H = HEIGHT - TOP - BOTTOM
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#999999")
SERIES = len(PALETTE)
OTHER = "other"


@dataclass(frozen=True, slots=True)
class Segment:
    label: str
    value: float
    x: float
    y: float
    width: float
    height: float
    colour: str
    text: str  # the value as a person reads it


@dataclass(frozen=True, slots=True)
class Column:
    day: str
    total: float
    text: str
    segments: list[Segment]


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    text: str


@dataclass(frozen=True, slots=True)
class Chart:
    key: str
    title: str
    unit: str
    top: str  # the y axis's top value, as text
    columns: list[Column]
    ticks: list[Tick]
    legend: list[tuple[str, str]]  # (label, colour)

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self.legend]

    def cell(self, column: Column, label: str) -> str:
        return next((s.text for s in column.segments if s.label == label), "0")


def number(value: float, money: bool = False) -> str:
    if money:
        return f"{value:,.4f}"
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def _keep(series: Sequence[Mapping[str, float]]) -> list[str]:
    """The labels drawn one by one, largest first; the rest go into `OTHER`."""
    totals: dict[str, float] = {}
    for day in series:
        for label, value in day.items():
            totals[label] = totals.get(label, 0.0) + value
    ranked = sorted((lab for lab, v in totals.items() if v > 0), key=lambda lab: -totals[lab])
    return ranked if len(ranked) <= SERIES else [*ranked[: SERIES - 1], OTHER]


def stacked(
    key: str,
    title: str,
    unit: str,
    days: Sequence[str],
    series: Sequence[Mapping[str, float]],
    fmt: Callable[[float], str] = number,
    ceiling: float | None = None,
) -> Chart:
    """A bar per day, one segment per label (of `series[i]`, day i's value per label); the
    axis goes up to `ceiling` when given (100 for a share), else to the tallest day."""
    labels = _keep(series)
    kept = set(labels)
    merged = []
    for day in series:
        values = {lab: v for lab, v in day.items() if lab in kept}
        rest = sum(v for lab, v in day.items() if lab not in kept)
        if rest:
            values[OTHER] = values.get(OTHER, 0.0) + rest
        merged.append(values)
    top = ceiling or max((sum(day.values()) for day in merged), default=0.0) or 1.0
    slot = (WIDTH - LEFT - RIGHT) / max(len(days), 1)
    colours = dict(zip(labels, PALETTE, strict=False))
    columns = []
    for n, (name, values) in enumerate(zip(days, merged, strict=True)):
        x, base = LEFT + n * slot + slot * 0.15, TOP + PLOT_H
        segments = []
        for label in labels:
            value = values.get(label, 0.0)
            if value <= 0:
                continue
            height = round(value / top * PLOT_H, 2)
            base -= height
            segments.append(
                Segment(
                    label,
                    value,
                    round(x, 2),
                    round(base, 2),
                    round(slot * 0.7, 2),
                    height,
                    colours[label],
                    fmt(value),
                )
            )
        columns.append(Column(name, sum(values.values()), fmt(sum(values.values())), segments))
    ticks = [
        Tick(round(LEFT + n * slot + slot / 2, 2), day[5:])
        for n, day in enumerate(days)
        if n % 7 == (len(days) - 1) % 7
    ]
    return Chart(
        key, title, unit, fmt(top), columns, ticks, [(lab, colours[lab]) for lab in labels]
    )


def usage_charts(days: Sequence[DaySums]) -> list[Chart]:
    """Tokens and money per day by model and by channel (by agent and by person too once
    records carry them), the cache-read share and the turns per day."""
    names = [d.day for d in days]
    charts = []
    for grouping, word in (
        ("model", "model"),
        ("channel", "channel"),
        ("agent", "agent"),
        ("person", "person"),
    ):
        tokens = [d.tokens.get(grouping, {}) for d in days]
        if grouping in ("agent", "person") and not any(tokens):
            continue
        charts.append(
            stacked(
                f"tokens-{grouping}",
                f"Tokens per day by {word}",
                "tokens",
                names,
                [{k: float(v) for k, v in t.items()} for t in tokens],
            )
        )
        costs = [d.cost.get(grouping, {}) for d in days]
        charts.append(
            stacked(
                f"cost-{grouping}",
                f"Cost per day by {word}",
                "cost",
                names,
                costs,
                lambda v: number(v, money=True),
            )
        )
    share = [
        {"cache read": 100.0 * d.cached_tokens / d.prompt_tokens} if d.prompt_tokens else {}
        for d in days
    ]
    charts.append(
        stacked(
            "cache",
            "Share of prompt tokens read from the cache",
            "%",
            names,
            share,
            lambda v: f"{v:.1f}%",
            100.0,
        )
    )
    charts.append(
        stacked("turns", "Turns per day", "turns", names, [{"turns": float(d.turns)} for d in days])
    )
    return charts


def timing_charts(days: Sequence[DayTimes]) -> list[Chart]:
    """Turn duration and time to first token per day: a bar up to the 90th percentile,
    its lower part the median (seconds)."""
    names = [d.day for d in days]

    def seconds(value: float) -> str:
        return f"{value:,.2f} s"

    def spread(days: Sequence[tuple[float, float] | None]) -> list[dict[str, float]]:
        return [
            {} if s is None else {"median": s[0], "median to 90th percentile": s[1] - s[0]}
            for s in days
        ]

    title = "{}: median and 90th percentile"
    return [
        stacked(
            "duration",
            title.format("Turn duration per day"),
            "s",
            names,
            spread([d.duration for d in days]),
            seconds,
        ),
        stacked(
            "first-token",
            title.format("Time to first token per day (streamed answers)"),
            "s",
            names,
            spread([d.first_token for d in days]),
            seconds,
        ),
    ]


@dataclass(frozen=True, slots=True)
class CapBar:
    scope: str
    used: str
    cap: str
    width: float  # of the filled part, out of WIDTH
    reached: bool


def cap_bars(limits: Sequence[Mapping[str, object]]) -> list[CapBar]:
    """Each daily cap as a bar filling toward its limit (full and red once reached)."""
    bars = []
    for cap in limits:
        used, limit = float(str(cap.get("used", 0))), float(str(cap.get("cap", 0)))
        share = min(used / limit, 1.0) if limit > 0 else 1.0
        bars.append(
            CapBar(
                str(cap.get("scope", "")),
                number(used),
                number(limit),
                round(share * WIDTH, 2),
                bool(cap.get("reached")),
            )
        )
    return bars
