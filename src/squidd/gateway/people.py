"""Who is speaking, and whose memory a turn may read: privacy between the people who share
one assistant.

With `agents.memory_scope = "person"` (or "auto" with more than one person allowed), each
person has a MEMORY.md of their own. A turn in a private conversation (a direct chat, a
mail, an API call) reads and writes the speaker's own; a turn in a group room (the channel
says so: `Inbound.group`) reads and writes only the shared one, so nobody's private memory
is read to the others. A turn nobody asked for (a cron run, the heartbeat, a sub-agent's
report) has no speaker: it reads the shared memory too. History search across
conversations (`search_all_history`) covers only the conversations the speaker spoke in.

`[[people]]` joins one person's ids (their Matrix id and email address) into one person; a
sender not listed is a person of their own, named by their id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from squidd.config import Settings
from squidd.core.models import Inbound, InboundKind

__all__ = ["People", "PersonCaps", "Speaker", "memory_scope"]


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who asks (`person`, kept on the user message) and whose MEMORY.md the turn reads and
    writes (`memory_of`: that person's; None: the shared one)."""

    person: str | None = None
    memory_of: str | None = None


NOBODY = Speaker()


def memory_scope(settings: Settings) -> Literal["shared", "person"]:
    """The memory scope in force: "auto" is per person when more than one person may talk
    to the assistant (the people listed, the Matrix and email senders allowed, or a whole
    mail domain or homeserver)."""
    chosen = settings.agents.memory_scope
    if chosen != "auto":
        return chosen
    return "person" if _people_count(settings) > 1 else "shared"


def _people_count(settings: Settings) -> int:
    # An agent's own account or mailbox takes its allowlist from `[matrix]` / `[email]`,
    # which count even when their own account is off (config/accounts.py).
    matrix_on, email_on = bool(settings.matrix_accounts()), bool(settings.mail_accounts())
    if email_on and settings.email.allowed_domains:
        return 2  # a whole domain: more than one person
    if matrix_on and settings.matrix.allowed_servers:
        return 2  # a whole homeserver: more than one person
    named = {i.lower(): p.name for p in settings.people for i in p.ids}
    senders: set[str] = set()
    if matrix_on:
        senders |= {u.lower() for u in settings.matrix.allowed_users}
    if email_on:
        senders |= {s.lower() for s in settings.email.allowed_senders}
    return len({named.get(s, s) for s in senders} | {p.name for p in settings.people})


@dataclass(frozen=True, slots=True)
class PersonCaps:
    """A person's own daily caps (`[[people]]` daily_tokens, daily_cost)."""

    tokens: int | None = None
    cost: float | None = None


class People:
    """Resolves a message's sender to a person and the turn's memory (see the module)."""

    def __init__(self, settings: Settings) -> None:
        self.scope = memory_scope(settings)
        self._names = {i.lower(): p.name for p in settings.people for i in p.ids}
        self.caps = {
            p.name: PersonCaps(p.daily_tokens, p.daily_cost)
            for p in settings.people
            if p.daily_tokens is not None or p.daily_cost is not None
        }

    def person(self, sender: str) -> str:
        return self._names.get(sender.lower(), sender)

    def speaker(self, inbound: Inbound) -> Speaker:
        if inbound.kind is not InboundKind.MESSAGE or not inbound.sender:
            return NOBODY
        person = self.person(inbound.sender)
        private = self.scope == "person" and not inbound.group
        return Speaker(person=person, memory_of=person if private else None)
