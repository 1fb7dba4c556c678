"""Daily caps (`[limits]`): refuse a turn whose scope already used its budget today.

Scopes: the whole daemon (tokens, money), the turn's session (tokens), the heartbeat and
cron (tokens each), a person of `[[people]]` (their turns' tokens and money), and an
agent of `[[agents.list]]` with a `limits` table (its own usage only; the daemon's caps
still hold, `DailyCaps.for_agent`). A turn
is refused when what its scope used today (local day of
`limits.timezone`, from the usage ledger) is at or over the cap; the turn's own cost is
not predicted. A refused turn gets `limits.refusal_text` without a model call (the
heartbeat gets its quiet reply, so nothing is sent every beat). The owner is told once per
day on `limits.notify_target`: the notice goes through the router like any reply, as the
run `limits@<day>` (an agent's: `limits:<agent>@<day>`) of the pseudo-channel "limits",
whose handled id keeps it to one a day across restarts too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import structlog

from squidd.config import Settings
from squidd.config.limits import LimitsSettings
from squidd.core.heartbeat import HEARTBEAT_SESSION
from squidd.core.models import ChannelName, Destination, Inbound, InboundKind, SessionId, SourceId
from squidd.core.usage import Price, UsageRecord, totals
from squidd.gateway.costs import prices_of, usage_today
from squidd.gateway.people import People
from squidd.gateway.runtime import Runtime
from squidd.store.usage import UsageLedger

log = structlog.get_logger()

NOTICE_CHANNEL = "limits"


@dataclass(frozen=True, slots=True)
class CapState:
    scope: str
    used: float
    cap: float

    @property
    def reached(self) -> bool:
        return self.used >= self.cap

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "used": self.used, "cap": self.cap, "reached": self.reached}


def _tokens(records: list[UsageRecord]) -> int:
    return sum(r.total_tokens for r in records)


def caps_of(
    settings: Settings,
    ledger: UsageLedger,
    submit: Callable[[Inbound], Awaitable[None]] | None = None,
) -> DailyCaps:
    """The daily caps of `settings`: the daemon's, its sessions', cron's, the heartbeat's
    and each person's, priced as `squidd usage` prices; the owner's notice to `submit`."""
    return DailyCaps(
        settings.limits, ledger, prices_of(settings), submit=submit, people=People(settings)
    )


class DailyCaps:
    """Checks a turn against `[limits]` and tells the owner once a day."""

    def __init__(
        self,
        settings: LimitsSettings,
        ledger: UsageLedger,
        prices: dict[str, Price],
        *,
        submit: Callable[[Inbound], Awaitable[None]] | None = None,
        people: People | None = None,
        agent: str = "",
        outer: DailyCaps | None = None,
    ) -> None:
        self._settings = settings
        self._ledger = ledger
        self._prices = prices
        self._submit = submit
        self._people = people
        self._agent = agent
        self._outer = outer
        self._notified: str | None = None

    def for_agent(self, agent: str, limits: LimitsSettings | None) -> DailyCaps:
        """Agent `agent`'s caps: `limits` (config's `Settings.agent_caps`) over the agent's
        own usage, and these (the daemon's, the people's) still holding; these alone
        when it has none of its own."""
        if limits is None:
            return self
        return DailyCaps(
            limits, self._ledger, self._prices, submit=self._submit, agent=agent, outer=self
        )

    @property
    def enabled(self) -> bool:
        s = self._settings
        caps = (
            s.daily_tokens,
            s.session_daily_tokens,
            s.daily_cost,
            s.heartbeat_daily_tokens,
            s.cron_daily_tokens,
        )
        people = bool(self._people and self._people.caps)
        outer = self._outer is not None and self._outer.enabled
        return any(cap is not None for cap in caps) or people or outer

    async def states(self, inbound: Inbound | None = None) -> list[CapState]:
        """The caps that apply (to `inbound`, or all daemon-wide ones) and today's use: the
        daemon's first, then an agent's own."""
        found = [] if self._outer is None else await self._outer.states(inbound)
        return found + await self.own_states(inbound)

    async def own_states(self, inbound: Inbound | None = None) -> list[CapState]:
        """These caps' states without the daemon's (an agent's: "... of agent <name>")."""
        mine = await self._states(inbound)
        if self._agent:
            mine = [replace(state, scope=f"{state.scope} of agent {self._agent}") for state in mine]
        return mine

    async def _states(self, inbound: Inbound | None) -> list[CapState]:
        s = self._settings
        if not self.enabled:
            return []
        records = await self._ledger.today_records()
        if self._agent:
            records = [r for r in records if r.agent == self._agent]
        found: list[CapState] = []
        if s.daily_tokens is not None:
            found.append(CapState("daily_tokens", _tokens(records), s.daily_tokens))
        if s.daily_cost is not None:
            cost = round(totals(records, self._prices).cost, 6)
            found.append(CapState("daily_cost", cost, s.daily_cost))
        # The heartbeat's scope: its turns, and the consolidation of its session.
        heartbeat = [
            r for r in records if r.purpose == "heartbeat" or r.session == HEARTBEAT_SESSION
        ]
        cron = [r for r in records if r.purpose == "cron"]
        kind = None if inbound is None else inbound.kind
        if s.heartbeat_daily_tokens is not None and kind in (None, InboundKind.HEARTBEAT):
            found.append(
                CapState("heartbeat_daily_tokens", _tokens(heartbeat), s.heartbeat_daily_tokens)
            )
        if s.cron_daily_tokens is not None and kind in (None, InboundKind.CRON):
            found.append(CapState("cron_daily_tokens", _tokens(cron), s.cron_daily_tokens))
        if s.session_daily_tokens is not None and inbound is not None:
            mine = [r for r in records if r.session == inbound.session_id]
            found.append(CapState("session_daily_tokens", _tokens(mine), s.session_daily_tokens))
        return found + self._person_states(records, inbound)

    def _person_states(self, records: list[UsageRecord], inbound: Inbound | None) -> list[CapState]:
        """The caps of the person `inbound` comes from (of every person, without one)."""
        people = self._people
        if people is None or not people.caps:
            return []
        names = list(people.caps)
        if inbound is not None:
            speaker = people.speaker(inbound).person
            names = [speaker] if speaker in people.caps else []
        found: list[CapState] = []
        for name in names:
            caps = people.caps[name]
            theirs = [r for r in records if r.person == name]
            if caps.tokens is not None:
                found.append(CapState(f"daily_tokens of {name}", _tokens(theirs), caps.tokens))
            if caps.cost is not None:
                cost = round(totals(theirs, self._prices).cost, 6)
                found.append(CapState(f"daily_cost of {name}", cost, caps.cost))
        return found

    async def refusal(self, inbound: Inbound) -> str | None:
        """The fixed reply when `inbound`'s scope is over its cap today, else None (the
        daemon's caps asked first: their notice is the daemon's)."""
        if self._outer is not None:
            refused = await self._outer.refusal(inbound)
            if refused is not None:
                return refused
        reached = [state for state in await self.states(inbound) if state.reached]
        if not reached:
            return None
        first = reached[0]
        log.warning(
            "turn_refused_daily_cap",
            session=inbound.session_id,
            channel=inbound.channel,
            agent=self._agent,
            scope=first.scope,
            used=first.used,
            cap=first.cap,
        )
        await self._notify(first)
        if inbound.quiet_reply is not None:
            return inbound.quiet_reply
        return self._settings.refusal_text

    async def _notify(self, state: CapState) -> None:
        day = self._ledger.today()
        if self._notified == day:
            return
        self._notified = day
        target = Destination.parse(self._settings.notify_target)
        if target is None or self._submit is None:
            return
        text = (
            f"squidd reached its daily cap {state.scope} ({state.used:g} of {state.cap:g}) "
            f"on {day}; turns in that scope get a fixed reply until midnight "
            f"({self._settings.timezone}). `squidd usage` shows where it went."
        )
        # One notice a day per agent with caps of its own (the handled id keeps it so).
        source = f"limits@{day}" if not self._agent else f"limits:{self._agent}@{day}"
        await self._submit(
            Inbound(
                channel=ChannelName(NOTICE_CHANNEL),
                source_id=SourceId(source),
                session_id=SessionId(NOTICE_CHANNEL),
                sender="",
                text=text,
                reply_to=target,
                kind=InboundKind.NOTICE,
            )
        )


async def agent_figures(runtime: Runtime, caps: DailyCaps | None) -> dict[str, Any]:
    """Agent `runtime.name`'s figures for `/status` and `squidd status --agent`: its usage
    today and its own caps (the daemon's are shown as the daemon's); {} with one agent."""
    settings = runtime.settings
    if not settings.agents.list:
        return {}
    own = [] if caps is None else await caps.own_states()
    return {
        "name": runtime.name,
        "usage_today": await usage_today(settings, runtime.usage, runtime.name),
        "limits": [state.to_dict() for state in own if state.scope.endswith(runtime.name)],
    }
