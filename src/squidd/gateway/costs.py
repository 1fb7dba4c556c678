"""Money and daily caps for the daemon: prices from `[llm.prices]`, today's totals for
`squidd status`, and (with `[limits]`) the gate that refuses turns over their cap."""

from __future__ import annotations

from typing import Any

from squidd.config import Settings
from squidd.core.usage import Price, totals
from squidd.store.usage import UsageLedger


def prices_of(settings: Settings) -> dict[str, Price]:
    return {
        name: Price(input=p.input, output=p.output, cached_input=p.cached_input)
        for name, p in settings.llm.prices.items()
    }


async def usage_today(settings: Settings, ledger: UsageLedger) -> dict[str, Any]:
    """Today's totals (local day) as `squidd status` shows them."""
    records = await ledger.today_records()
    return {"day": ledger.today(), **totals(records, prices_of(settings)).to_dict()}
