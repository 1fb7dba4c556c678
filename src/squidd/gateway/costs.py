"""Money and daily caps for the daemon: prices from `[llm.prices]`, else from the maintained
price table of the `genai-prices` package (its bundled data, read offline: never updated
from here), today's totals for `squidd status`, and (with `[limits]`) the gate that refuses
turns over their cap."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from squidd.config import Settings
from squidd.config.providers import LOCAL_KINDS
from squidd.core.usage import Price, totals
from squidd.store.usage import UsageLedger


def prices_of(settings: Settings, models: Iterable[str] = ()) -> dict[str, Price]:
    """The configured prices (a provider's own for its models under "provider/model", then
    `[llm.prices]` by model name), and for each of `models` the config does not price, the
    price table's (a model neither knows is left out: its calls cost nothing known)."""
    prices = {
        name: Price(input=p.input, output=p.output, cached_input=p.cached_input)
        for name, p in settings.llm.prices.items()
    }
    for provider in settings.llm.providers:
        for listed in provider.models:
            if listed.prices is not None:
                p = listed.prices
                prices[f"{provider.name}/{listed.name}"] = Price(
                    input=p.input, output=p.output, cached_input=p.cached_input
                )
    for entry in settings.llm.resolved_chain():
        # A local server's calls cost nothing unless the config says otherwise, even when
        # its model has the name of a hosted one in the price table.
        if entry.provider.kind in LOCAL_KINDS and entry.prices is None:
            prices.setdefault(entry.label, Price())
    # Speech's records count characters as their prompt: priced per million of them, and at
    # nothing known unless configured (never by a token price of a model of the same name).
    speech = settings.speech
    prices[f"speech/{speech.model}"] = Price(input=speech.price_per_1m_chars or 0.0)
    for model in models:
        if model not in prices and (known := table_price(model)) is not None:
            prices[model] = known
    return prices


@functools.lru_cache(maxsize=256)
def table_price(model: str) -> Price | None:
    """Per million tokens from the price table, None for a model it does not know."""
    from genai_prices import Usage, calc_price

    million = 1_000_000

    def cost(**tokens: int) -> float:
        return float(calc_price(Usage(**tokens), model_ref=model).total_price)

    try:
        return Price(
            input=cost(input_tokens=million),
            output=cost(output_tokens=million),
            cached_input=cost(input_tokens=million, cache_read_tokens=million),
        )
    except (LookupError, ValueError, TypeError, ArithmeticError):
        return None


async def usage_today(
    settings: Settings, ledger: UsageLedger, agent: str | None = None
) -> dict[str, Any]:
    """Today's totals (local day) as `squidd status` shows them; with `agent`, that agent's
    calls only (a call filed under no agent is the default agent's)."""
    records = await ledger.today_records()
    if agent is not None:
        default = settings.default_agent
        records = [r for r in records if (r.agent or default) == agent]
    prices = prices_of(settings, {record.model for record in records})
    return {"day": ledger.today(), **totals(records, prices).to_dict()}
