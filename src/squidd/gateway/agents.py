"""Which agent answers a message (config/agents.py has the agents themselves).

In this order: the agent the message names (`Inbound.agent`: an API request's `model`, a
cron job's, a sub-agent's run), when there is one by that name; the agent whose own Matrix
account or mailbox it came to (its channel `matrix-<agent>`, `email-<agent>`); a room of
`[matrix]`'s account an agent lists (`rooms`); a mail address an agent lists (`addresses`),
or the bot's own address with an agent's name as its +tag (`bot+planner@example.org`
reaches "planner"); else the default agent, the first of `[[agents.list]]`. A message's
route depends only on the message and the config, so a message handed on again after a
restart reaches the same agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from squidd.config import Settings
from squidd.config.accounts import EMAIL, MATRIX
from squidd.core.models import Inbound

__all__ = ["AgentRoutes", "agent_named"]

T = TypeVar("T")


class AgentRoutes:
    """The routing rules of one config (see the module)."""

    def __init__(self, settings: Settings) -> None:
        self.default = settings.default_agent
        self.names = tuple(settings.agent_names)
        entries = settings.agents.list
        self._rooms = {room: e.name for e in entries for room in e.rooms}
        accounts = [*settings.matrix_accounts(), *settings.mail_accounts()]
        self._accounts = {a.channel: a.agent for a in accounts}
        self._addresses = {a.lower(): e.name for e in entries for a in e.addresses}
        own = settings.email.address.lower() if settings.email.enabled else ""
        self._own = own.partition("@") if "@" in own else None

    def agent_of(self, inbound: Inbound) -> str:
        if inbound.agent in self.names:
            return inbound.agent
        own = self._accounts.get(inbound.channel)
        if own is not None and inbound.channel not in (MATRIX, EMAIL):
            return own
        destination = inbound.reply_to
        if inbound.channel == MATRIX and destination is not None:
            room = self._rooms.get(destination.target)
            if room is not None:
                return room
        for address in inbound.recipients:
            named = self._by_address(address.lower())
            if named is not None:
                return named
        return self.default

    def _by_address(self, address: str) -> str | None:
        if address in self._addresses:
            return self._addresses[address]
        if self._own is None:
            return None
        local, _, domain = address.partition("@")
        base, plus, tag = local.partition("+")
        own_local, _, own_domain = self._own
        if plus and base == own_local and domain == own_domain and tag in self.names:
            return tag
        return None


def agent_named(parts: Mapping[str, T], name: str, default: str) -> T:
    """The part of agent `name`, or of the default agent for a name no agent has (a run
    kept from a config that had it)."""
    return parts.get(name) or parts[default]
