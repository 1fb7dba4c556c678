"""Usage records: what each model call cost, by session, model and purpose, and the sums.

Every model call's reported usage becomes one `UsageRecord` (a turn's first call, each
further tool step, a consolidation, a meta-consolidation, a heartbeat or cron run). The
ledger (`squidd.store.usage`) keeps them per local day; this module only adds them up and
prices them, so `squidd usage`, `squidd status` and the daily caps agree on one arithmetic.
Prices are per million tokens; cached prompt tokens use the cached price when one is set.
A spoken answer (`purpose = "speech"`, provider `speech`) counts its characters as its
prompt tokens: its price is per million characters, and the token caps count them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

from squidd.core.models import Usage

Purpose = Literal[
    "turn",
    "tool_step",
    "consolidation",
    "meta_consolidation",
    "heartbeat",
    "cron",
    "sub_agent",
    "speech",
    "speech_summary",
]
PURPOSES: tuple[str, ...] = get_args(Purpose)
GroupBy = Literal["session", "model", "purpose", "day", "provider", "agent", "person"]
UsageKey = tuple[str, str, str, str, str, str, str]
"""What records are summed by: day, agent, person, session, provider, model, purpose."""


@dataclass(frozen=True, slots=True)
class Price:
    """Money per million tokens; `cached_input` defaults to the input price."""

    input: float = 0.0
    output: float = 0.0
    cached_input: float | None = None


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One model call (or, once a day is compacted, the sum of several: `calls`)."""

    day: str
    session: str
    model: str
    purpose: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    calls: int = 1
    provider: str = ""
    """The provider that answered ("" in records written before providers existed)."""
    agent: str = ""
    """The agent whose call it was ("" with one agent, and before agents existed)."""
    person: str = ""
    """The person whose turn it was ("" for runs nobody asked for, and before people)."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def priced_as(self) -> str:
        """The name prices are looked up by first: provider/model when a provider is named."""
        return f"{self.provider}/{self.model}" if self.provider else self.model

    def key(self) -> UsageKey:
        return (
            self.day,
            self.agent,
            self.person,
            self.session,
            self.provider,
            self.model,
            self.purpose,
        )


@dataclass(frozen=True, slots=True)
class Failover:
    """One call's fall-over from one provider/model pair of the chain to the next, and why
    (`at`: ISO time, UTC)."""

    at: str
    from_: str
    to: str
    reason: str


class UsageSink(Protocol):
    """Where the core reports a model call's usage (the ledger, or a test double)."""

    async def record(
        self,
        *,
        session: str,
        model: str,
        purpose: str,
        prompt: int,
        completion: int,
        cached: int,
        provider: str = "",
        agent: str = "",
        person: str = "",
    ) -> None: ...


class AgentUsage:
    """A `UsageSink` that files every call under one agent of the daemon (`agent` of the
    record), in the daemon's one ledger."""

    def __init__(self, ledger: UsageSink, agent: str) -> None:
        self._ledger = ledger
        self._agent = agent

    async def record(
        self,
        *,
        session: str,
        model: str,
        purpose: str,
        prompt: int,
        completion: int,
        cached: int,
        provider: str = "",
        agent: str = "",
        person: str = "",
    ) -> None:
        await self._ledger.record(
            session=session,
            model=model,
            purpose=purpose,
            prompt=prompt,
            completion=completion,
            cached=cached,
            provider=provider,
            agent=agent or self._agent,
            person=person,
        )


async def record_usage(
    sink: UsageSink | None, session: str, purpose: str, usage: Usage, person: str | None = None
) -> None:
    """File one model call's reported `usage` with `sink` (nothing when there is none), for
    `person` when a person asked for it (their daily caps)."""
    if sink is None:
        return
    await sink.record(
        session=session,
        model=usage.model,
        purpose=purpose,
        prompt=usage.prompt_tokens,
        completion=usage.completion_tokens,
        cached=usage.cached_tokens,
        provider=usage.provider,
        person=person or "",
    )


@dataclass(slots=True)
class Totals:
    """Summed usage (and money, when prices are known) of some records."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, record: UsageRecord, prices: Mapping[str, Price]) -> None:
        self.calls += record.calls
        self.prompt_tokens += record.prompt_tokens
        self.completion_tokens += record.completion_tokens
        self.cached_tokens += record.cached_tokens
        self.cost += cost_of(record, prices)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "total_tokens": self.total_tokens,
            "cost": round(self.cost, 6),
        }


def cost_of(record: UsageRecord, prices: Mapping[str, Price]) -> float:
    """The record's money: its provider's price for the model, else the model's price.
    Cached prompt tokens cost the cached price; a call after a fall-over that lost the
    prompt cache reports no cached tokens and so costs the full input price."""
    price = prices.get(record.priced_as) or prices.get(record.model)
    if price is None:
        return 0.0
    cached = min(record.cached_tokens, record.prompt_tokens)
    cached_price = price.input if price.cached_input is None else price.cached_input
    fresh = record.prompt_tokens - cached
    money = fresh * price.input + cached * cached_price + record.completion_tokens * price.output
    return money / 1_000_000


def add_up(first: UsageRecord, second: UsageRecord) -> UsageRecord:
    """Two records of one key (`UsageRecord.key`) as one: tokens and calls summed."""
    return UsageRecord(
        day=second.day,
        session=second.session,
        model=second.model,
        purpose=second.purpose,
        prompt_tokens=first.prompt_tokens + second.prompt_tokens,
        completion_tokens=first.completion_tokens + second.completion_tokens,
        cached_tokens=first.cached_tokens + second.cached_tokens,
        calls=first.calls + second.calls,
        provider=second.provider,
        agent=second.agent,
        person=second.person,
    )


def compact(records: Iterable[UsageRecord]) -> list[UsageRecord]:
    """One record per (day, session, provider, model, purpose), summed; order of first
    appearance."""
    sums: dict[UsageKey, UsageRecord] = {}
    for record in records:
        key = record.key()
        seen = sums.get(key)
        sums[key] = record if seen is None else add_up(seen, record)
    return list(sums.values())


def totals(records: Iterable[UsageRecord], prices: Mapping[str, Price]) -> Totals:
    result = Totals()
    for record in records:
        result.add(record, prices)
    return result


def group(
    records: Iterable[UsageRecord], by: GroupBy, prices: Mapping[str, Price]
) -> dict[str, Totals]:
    """Totals per session, model, purpose or day, largest token count first."""
    groups: dict[str, Totals] = {}
    for record in records:
        name = getattr(record, by)
        groups.setdefault(name, Totals()).add(record, prices)
    return dict(sorted(groups.items(), key=lambda item: (-item[1].total_tokens, item[0])))
