"""`squidd usage`: what the model calls cost, read from the usage ledger.

Default: today's totals (local day of `limits.timezone`), then one line per session. With
`--by session|model|provider|purpose|day` one line per group instead; `--since YYYY-MM-DD` (or
`7d` for the last seven days) widens the range from today. Token numbers are plain
integers; money comes from `[llm.prices]`, else from the price table of the `genai-prices`
package for the models it knows, and a last line names the models priced by neither. The
provider chain's fall-overs of the range follow, counted by pair and reason.
Reading compacts the days that are over (one line per session, model and purpose), as the
daemon does at start.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import date, timedelta

import anyio

from squidd.commands import Commands
from squidd.config import Settings
from squidd.core.usage import Failover, GroupBy, Price, Totals, UsageRecord, group, totals
from squidd.gateway.costs import prices_of
from squidd.store.usage import UsageLedger


def parse_since(text: str, today: date) -> date:
    """`2026-11-01`, or `Nd` for the last N days including today."""
    text = text.strip()
    if text.endswith("d") and text[:-1].isdigit():
        return today - timedelta(days=max(0, int(text[:-1]) - 1))
    return date.fromisoformat(text)


def _line(name: str, t: Totals, priced: bool) -> str:
    money = f"  cost {t.cost:.4f}" if priced else ""
    return (
        f"{name:<32} calls {t.calls:>6}  input {t.prompt_tokens:>10}  "
        f"cached {t.cached_tokens:>10}  output {t.completion_tokens:>9}  "
        f"total {t.total_tokens:>10}{money}"
    )


def format_usage(
    records: Sequence[UsageRecord],
    prices: Mapping[str, Price],
    *,
    by: GroupBy = "session",
    title: str,
) -> str:
    priced = bool(prices)
    lines = [_line(title, totals(records, prices), priced)]
    groups = group(records, by, prices)
    if groups:
        lines.append(f"by {by}:")
        lines.extend(_line(f"  {name or '-'}", t, priced) for name, t in groups.items())
    return "\n".join(lines)


async def _usage(settings: Settings, by: GroupBy, since: str | None) -> str:
    ledger = UsageLedger(settings.storage.data_dir, timezone=settings.limits.timezone)
    await ledger.compact_past_days()
    today = date.fromisoformat(ledger.today())
    start = parse_since(since, today) if since else today
    records = await ledger.read(start)
    title = "today" if start == today else f"since {start.isoformat()}"
    models = sorted({record.model for record in records})
    prices = prices_of(settings, models)
    text = format_usage(records, prices, by=by, title=title)
    failovers = await ledger.failovers(start)
    if failovers:
        text += "\n" + failover_lines(failovers)
    unknown = sorted(
        {r.model for r in records if r.priced_as not in prices and r.model not in prices}
    )
    if unknown:
        text += (
            f"\nno price known for {', '.join(unknown)}: their calls count no money; set "
            '[llm.prices."MODEL"] input = ..., output = ... (per million tokens) to price them'
        )
    return text


def failover_lines(failovers: Sequence[Failover]) -> str:
    """The fall-overs of the range, counted by pair and reason, most frequent first."""
    counts = Counter((f.from_, f.to, f.reason) for f in failovers)
    lines = [f"failovers: {len(failovers)}, last at {failovers[-1].at}"]
    lines.extend(
        f"  {from_} -> {to}: {reason} (x{count})"
        for (from_, to, reason), count in counts.most_common(10)
    )
    return "\n".join(lines)


def usage_command(settings: Settings, *, by: GroupBy = "session", since: str | None = None) -> int:
    try:
        text = anyio.run(_usage, settings, by, since)
    except ValueError:
        print(f"usage: --since must be YYYY-MM-DD or Nd (e.g. 7d), not {since!r}", file=sys.stderr)
        return 2
    print(text)
    return 0


def register(commands: Commands) -> None:
    usage = commands.add(
        "usage",
        help="tokens and money spent, from the usage ledger",
        run=_run,
        example="squidd usage\nsquidd usage --by provider --since 7d",
    )
    usage.add_argument(
        "--by",
        choices=("session", "model", "provider", "agent", "person", "purpose", "day"),
        default="session",
        help="one line per session (default), model, provider, agent, person, purpose or day",
    )
    usage.add_argument("--since", default=None, help="from this day on: YYYY-MM-DD or Nd")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    return usage_command(settings, by=args.by, since=args.since)
