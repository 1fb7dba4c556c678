"""One verification flow as the bot keeps it, and what tells a verification event apart.

A flow's id is the request's `transaction_id` (to-device) or the request event's id (in
a room); `state` goes requested → ready → started → keys → confirmed → done, or to
cancelled from any of them; "interrupted" is a flow a restart cut after its start (see
`kept`), ignored until it is cancelled.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from squidd.channels.matrix.verification.kept import KeptFlow
from squidd.channels.matrix.verification.sas import SasExchange

PREFIX = "m.key.verification."
REQUEST = PREFIX + "request"
LIFETIME_S = 600.0  # the spec: a request older than 10 minutes is void
FINISHED = ("done", "cancelled")
IDLE = (*FINISHED, "interrupted")  # steps of these flows are ignored
FUTURE_SLACK_MS = 5 * 60 * 1000


@dataclass(slots=True)
class Flow:
    id: str
    user_id: str
    device_id: str
    room_id: str | None
    created: float
    state: str = "requested"  # ready, started, keys, confirmed, done, cancelled
    exchange: SasExchange | None = None
    their_mac: Mapping[str, Any] | None = None
    confirmed: bool = False
    verified_keys: list[str] = field(default_factory=list)
    cancel_code: str = ""
    started_at: float = field(default_factory=time.time)  # the wall clock, for `kept`

    def kept(self) -> KeptFlow:
        return KeptFlow(
            self.id, self.user_id, self.device_id, self.room_id, self.state, self.started_at
        )

    def view(self, now: float) -> dict[str, Any]:
        shown = self.exchange is not None and self.exchange.keys_exchanged
        return {
            "id": self.id,
            "user_id": self.user_id,
            "device_id": self.device_id,
            "room_id": self.room_id,
            "state": self.state,
            "emoji": self.exchange.emoji() if shown and self.exchange else None,
            "decimals": list(self.exchange.decimals()) if shown and self.exchange else None,
            "age_s": round(now - self.created, 1),
            "cancel_code": self.cancel_code or None,
        }


def is_room_verification(source: Mapping[str, Any]) -> bool:
    """A room event that belongs to a verification: the request message or a later step."""
    kind = str(source.get("type", ""))
    if kind.startswith(PREFIX):
        return True
    content = source.get("content")
    return (
        kind == "m.room.message"
        and isinstance(content, Mapping)
        and (content.get("msgtype") == REQUEST)
    )


def stale(sent: Any) -> bool:
    """A request sent (ms since the epoch) more than 10 minutes ago or 5 in the future."""
    if not isinstance(sent, int):
        return True
    now_ms = int(time.time() * 1000)
    return now_ms - sent > LIFETIME_S * 1000 or sent - now_ms > FUTURE_SLACK_MS
