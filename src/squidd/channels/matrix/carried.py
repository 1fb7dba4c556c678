"""What the Matrix channel keeps across the connections of one run (`Carried`).

A `connection.Connection` lives as long as its client; what must outlive a reconnect is
built once by the channel and handed to each new connection: event ids seen (duplicates
skipped), invites answered, events waiting for their keys, the marks of the messages
being answered, the verification flows, the bot's identity as last made sure of, the
account's rate budget and its sync ledger.

The ledger is one per run: an event handed on by one connection may be answered after the
next one started (it waited in a burst or in its session's line), and its ack must still
hold the position back, which the next connection, skipping the event as seen, could not
do with a ledger of its own.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass, field

from squidd.channels.matrix.identity.gate import Remembered
from squidd.channels.matrix.ids import EventId
from squidd.channels.matrix.message_marks import MessageMarks
from squidd.channels.matrix.rate import RateBudget
from squidd.channels.matrix.state import MatrixFiles, SyncLedger
from squidd.channels.matrix.undecrypted import Undecrypted
from squidd.channels.matrix.verification.flows import Verifications
from squidd.core.backoff import Backoff
from squidd.core.ports import MediaSink

__all__ = ["SEEN_MAX", "Carried"]

SEEN_MAX = 20_000  # event ids remembered for de-duplication within one run


@dataclass(slots=True)
class Carried:
    """What the channel keeps across connections of one run."""

    marks: MessageMarks
    undecrypted: Undecrypted
    backoff: Backoff
    verifications: Verifications
    seen: OrderedDict[str, None] = field(default_factory=OrderedDict)
    invites_seen: set[str] = field(default_factory=set)
    media: MediaSink | None = None
    max_download_bytes: int = 0
    identity: Remembered = field(default_factory=Remembered)
    budget: RateBudget = field(default_factory=RateBudget)
    """The account's rate budget: what was spent before a reconnect still counts."""
    ledgers: dict[str, SyncLedger] = field(default_factory=dict)
    channel: str = "matrix"
    """The channel's name (`matrix-<agent>` for an agent's own account)."""
    siblings: frozenset[str] = frozenset()
    """The daemon's other bot accounts: never answered (channels/matrix/policy.py)."""

    def ledger(self, user_id: str, files: MatrixFiles) -> SyncLedger:
        """The account's sync ledger for the whole run (see the module)."""
        found = self.ledgers.get(user_id)
        if found is None:
            save = functools.partial(files.save_sync_token, user_id)
            found = self.ledgers[user_id] = SyncLedger(save)
        return found

    def remember(self, event_id: EventId) -> bool:
        """Record an event id; False if it was seen before in this run."""
        if event_id in self.seen:
            return False
        self.seen[event_id] = None
        if len(self.seen) > SEEN_MAX:
            self.seen.popitem(last=False)
        return True

    def forget(self, event_id: EventId) -> None:
        """Let an event that was never handed on be received again."""
        self.seen.pop(event_id, None)
