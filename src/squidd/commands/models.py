"""`squidd models`: each provider's served models, their windows and prices, and which of
them the chain uses, in its order.

Each provider is asked now (llm/survey.py): its keys are tried with the model list (named
by their place, never by value), a local server (ollama, llamacpp, vllm) is asked for its
models and the context it serves each with (llm/local.py). A provider that does not answer
is listed with the reason, and the chain's models are listed under it all the same, so the
command is useful offline. Prices: a provider model's own in the config, then
`[llm.prices]`, then the price table (a local server's models cost nothing unless priced).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from squidd.commands import Commands
from squidd.config import Settings
from squidd.llm.http import async_client

if TYPE_CHECKING:
    from squidd.config.providers import ProviderSettings
    from squidd.llm.survey import ProviderTrial

__all__ = ["register"]


def register(commands: Commands) -> None:
    parser = commands.add(
        "models",
        help="list each provider's models with their windows, prices and place in the chain",
        description="Ask each provider of [[llm.providers]] (or the one [llm] endpoint) what it "
        "serves now: its kind and URL, each key's state (key 1 ok, key 2 refused; never the "
        "key), each model with the context window it serves (a local server's own figure and "
        "where it came from) and its price per million tokens, and which models the chain "
        "uses, in order. A provider that does not answer is listed with the reason.",
        example="squidd models\nsquidd models --json",
        run=_run,
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


@dataclass(frozen=True, slots=True)
class ModelRow:
    name: str
    window: int | None
    source: str
    price: dict[str, float | None] | None
    chain: int | None
    """Its place in the chain (1 first), None when the chain does not use it."""

    def line(self) -> str:
        window = f"window {self.window}" if self.window else "window ?"
        # A long source (Ollama's assumed default) is cut to its first clause; --json has it.
        short = self.source.split(": ", 1)[0] if len(self.source) > 60 else self.source
        source = f" ({short})" if short else ""
        price = _price_text(self.price)
        place = f"  chain #{self.chain}" if self.chain else ""
        return f"  {self.name:<28} {window}{source}  {price}{place}"


def _price_text(price: dict[str, float | None] | None) -> str:
    if price is None:
        return "price unknown"
    if not price["input"] and not price["output"]:
        return "free"
    return f"{price['input']:g} in / {price['output']:g} out per 1M tokens"


def _run(args: argparse.Namespace, settings: Settings) -> int:
    import anyio

    document = anyio.run(survey, settings)
    print(json.dumps(document, indent=2, ensure_ascii=False) if args.json else render(document))
    return 0


async def survey(settings: Settings) -> dict[str, Any]:
    """Every provider as asked now, with its models (see the module)."""
    import httpx2

    from squidd.llm.survey import try_provider

    cfg = settings.llm
    timeout = httpx2.Timeout(cfg.connect_timeout_s * 2, connect=cfg.connect_timeout_s)
    chain = [entry.label for entry in cfg.resolved_chain()]
    providers = []
    async with async_client(timeout=timeout) as client:
        for provider in cfg.resolved_providers():
            trial = await try_provider(provider, client=client)
            providers.append(
                {
                    "name": provider.name,
                    "kind": provider.kind,
                    "base_url": provider.base_url,
                    "ok": trial.ok,
                    "reason": trial.reason,
                    "keys": [{"key": f"key {k.number}", "state": k.state} for k in trial.keys],
                    "models": [_as_dict(row) for row in _rows(settings, provider, trial)],
                }
            )
    return {"chain": chain, "providers": providers}


def _as_dict(row: ModelRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "window": row.window,
        "window_source": row.source,
        "price": row.price,
        "chain": row.chain,
    }


def _rows(settings: Settings, provider: ProviderSettings, trial: ProviderTrial) -> list[ModelRow]:
    """The models it serves (or, when it does not answer, the chain's there), the chain's
    models it does not list at the end."""
    from squidd.llm.local import ServedModel

    places = {
        entry.model: number
        for number, entry in enumerate(settings.llm.resolved_chain(), start=1)
        if entry.provider.name == provider.name
    }
    served = list(trial.models)
    names = {m.name for m in served}
    for wanted in places:
        if wanted not in names and f"{wanted}:latest" not in names:
            why = "not listed by the server" if trial.ok and trial.listed else ""
            served.append(ServedModel(wanted, None, why))
    rows = []
    for model in served:
        bare = model.name.removesuffix(":latest")
        name = model.name if model.name in places else bare
        listed = provider.model(name)
        window = model.window or (listed.context_window if listed else None)
        source = model.source if model.window else ("configured" if window else model.source)
        rows.append(
            ModelRow(
                model.name,
                window,
                "" if source == "the endpoint does not say" else source,
                _price(settings, provider, name),
                places.get(name),
            )
        )
    return rows


def _price(
    settings: Settings, provider: ProviderSettings, model: str
) -> dict[str, float | None] | None:
    from squidd.config.providers import LOCAL_KINDS
    from squidd.gateway.costs import prices_of, table_price

    prices = prices_of(settings)
    price = prices.get(f"{provider.name}/{model}") or prices.get(model)
    if price is None and provider.kind not in LOCAL_KINDS:
        price = table_price(model)
    if price is None:
        return (
            {"input": 0.0, "output": 0.0, "cached_input": None}
            if provider.kind in LOCAL_KINDS
            else None
        )
    return {"input": price.input, "output": price.output, "cached_input": price.cached_input}


def render(document: dict[str, Any]) -> str:
    """The survey for a person: a block per provider."""
    lines = [f"chain: {' -> '.join(document['chain'])}"]
    for provider in document["providers"]:
        lines.append(f"provider {provider['name']} ({provider['kind']}) {provider['base_url']}")
        keys = ", ".join(f"{k['key']} {k['state']}" for k in provider["keys"])
        local = provider["kind"] != "openai"
        lines.append(f"  keys: {keys or ('none (a local server needs none)' if local else 'none')}")
        if not provider["ok"]:
            lines.append(f"  not reachable: {provider['reason']}")
        for row in provider["models"]:
            lines.append(
                ModelRow(
                    row["name"], row["window"], row["window_source"], row["price"], row["chain"]
                ).line()
            )
    return "\n".join(lines)
