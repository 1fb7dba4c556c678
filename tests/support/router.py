"""The router as the tests build it by hand: one builder with the doubles for what a test
is not about (its records in memory, a poison guard over memory, a health per channel
kept for the router's life, short delivery retries), and a channel that collects what
the router delivers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from squidd.core.backoff import Backoff
from squidd.core.models import Outbound
from squidd.core.poison import PoisonGuard
from squidd.core.router import Router
from squidd.core.settlement import SettlementParts
from squidd.core.supervisor import ChildHealth
from tests.support.doubles import MemoryHandledLog, MemoryOutbox, memory_poison


class Records(MemoryHandledLog, MemoryOutbox):
    """The router's handled log and outbox in one object, from the shared doubles."""

    def __init__(self) -> None:
        MemoryHandledLog.__init__(self)
        MemoryOutbox.__init__(self)


class Collect:
    """A channel named `c` that keeps what it is sent."""

    name = "c"

    def __init__(self) -> None:
        self.sent: list[Outbound] = []

    async def run(self, inbox: object, *, task_status: object) -> None:
        raise NotImplementedError

    async def send(self, outbound: Outbound) -> None:
        self.sent.append(outbound)


def build_router(
    run_turn: Callable[..., Awaitable[Any]],
    channels: Mapping[str, Any],
    *,
    records: Records | None = None,
    poison: PoisonGuard | None = None,
    max_concurrent_turns: int = 2,
    backoff: Backoff | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    health_of: Callable[[str], ChildHealth] | None = None,
) -> Router:
    """A `Router` over `channels`, with `records` as both its handled log and its outbox."""
    records = records if records is not None else Records()
    health: dict[str, ChildHealth] = {}
    extra: dict[str, Any] = {} if sleep is None else {"sleep": sleep}
    parts = SettlementParts(
        run_turn=run_turn,
        channels=channels,
        handled=records,
        outbox=records,
        poison=poison if poison is not None else memory_poison(),
        health_of=health_of or (lambda name: health.setdefault(name, ChildHealth(name))),
        delivery_backoff=backoff or Backoff(0.01, 0.01),
        **extra,
    )
    return Router(parts, max_concurrent_turns=max_concurrent_turns)
