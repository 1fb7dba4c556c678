"""Reactions the bot puts on room events (outgoing), and the status reactions it shows on
a person's message. The reactions a person sends, as answers, are `reaction_answers`.

`react`, `unreact` and `read_receipt` are the three small requests (an `m.reaction`
annotation sent the way replies are, so encrypted rooms work; a redaction; a read marker),
for any part of the channel that marks an event. They never raise for what the homeserver
says or for a homeserver out of reach: a reaction is a courtesy, never worth failing a turn
over; failures are logged at debug.

`StatusReactions` shows a message's state on it, as `message_marks.MessageMarks` moves it
along: `taken` (👀, and a read receipt) when it goes to the inbox, replaced by `done` (✅)
when its reply was sent or it was settled as done without one (an approval answer taken, a
message of a burst answered through a later one), or by `failed` (❌) when it was given up
on (its reply refused for good, the message parked). The keys and the
switch are settings (`matrix.status_reactions`, `matrix.reaction_*`,
`matrix.read_receipts`). The requests run in order on `run`'s task, off the sync loop; a
message's state lives in memory until it is settled (after a restart a 👀 placed before it
stays beside the final mark).

Reactions and redactions spend from the account's rate budget (`rate.py`) behind replies.
A 👀 still waiting for a token when its message's ✅ or ❌ is queued is left out (the final
mark alone says more, and no redaction is needed); the read receipt is not rate-limited and
always goes out.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import structlog
from nio import AsyncClient, ErrorResponse

from squidd.channels.matrix.client import call
from squidd.channels.matrix.ids import EventId, RoomId
from squidd.channels.matrix.rate import Priority, budget_for
from squidd.channels.matrix.send import send_event
from squidd.errors import SquiddError

__all__ = ["ReactionKeys", "StatusReactions", "react", "read_receipt", "unreact"]

log = structlog.get_logger()


async def react(
    client: AsyncClient,
    room_id: RoomId,
    event_id: EventId,
    key: str,
    *,
    device_trust: str = "all",
    apply_trust: Callable[[], None] | None = None,
) -> EventId | None:
    """Annotate `event_id` with `key`; the reaction's event id, None if it was not sent."""
    content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
    try:
        sent = await send_event(
            client,
            room_id,
            "m.reaction",
            content,
            tx_id=f"squidd-{uuid.uuid4().hex}",
            device_trust=device_trust,
            apply_trust=apply_trust,
            priority=Priority.REACTION,
        )
    except SquiddError as exc:
        log.debug("matrix_reaction_failed", room=room_id, reason=str(exc))
        return None
    return EventId(sent)


async def unreact(client: AsyncClient, room_id: RoomId, reaction_id: EventId) -> bool:
    """Redact a reaction sent before; False if the homeserver did not take it."""
    async with budget_for(client).spend(Priority.REACTION):  # a redaction is an event too
        return await _quietly("redaction", room_id, client.room_redact(room_id, reaction_id))


async def read_receipt(client: AsyncClient, room_id: RoomId, event_id: EventId) -> bool:
    """Mark `event_id` read (read receipt and fully-read marker)."""
    markers = client.room_read_markers(room_id, fully_read_event=event_id, read_event=event_id)
    return await _quietly("read receipt", room_id, markers)


async def _quietly(action: str, room_id: RoomId, request: Any) -> bool:
    try:
        response = await call(action, request)
    except SquiddError as exc:
        log.debug("matrix_marker_failed", action=action, room=room_id, reason=str(exc))
        return False
    if isinstance(response, ErrorResponse):
        log.debug("matrix_marker_failed", action=action, room=room_id, reason=response.message)
        return False
    return True


@dataclass(frozen=True, slots=True)
class ReactionKeys:
    taken: str = "👀"
    done: str = "✅"
    failed: str = "❌"


Step = Literal["taken", "done", "failed"]


class StatusReactions:
    """The status reactions of the messages being answered, sent by `run` while connected;
    `apply_trust` is the connection's trust pass of the moment (whose devices a reaction in
    an encrypted room is encrypted for)."""

    def __init__(
        self,
        *,
        enabled: bool,
        receipts: bool,
        keys: ReactionKeys,
        device_trust: str = "all",
        apply_trust: Callable[[], None] | None = None,
    ) -> None:
        self._enabled = enabled
        self._receipts = receipts
        self._keys = keys
        self._device_trust = device_trust
        self._queue: deque[tuple[Step, RoomId, EventId]] = deque()
        self._placed: dict[EventId, EventId | None] = {}  # message -> its 👀 reaction
        self._answered: set[EventId] = set()
        self._order: dict[RoomId, list[EventId]] = {}  # messages taken and not yet settled
        self._wakeup = anyio.Event()
        self._waiting: tuple[EventId, anyio.CancelScope] | None = None  # a 👀 short of a token
        self._apply_trust = apply_trust
        self.skipped = 0

    def taken(self, room_id: RoomId, event_id: EventId) -> None:
        self._order.setdefault(room_id, []).append(event_id)
        if self._enabled or self._receipts:
            self._push("taken", room_id, event_id)

    def answered(self, room_id: RoomId, event_id: EventId) -> None:
        """Its reply went out: ✅ (once, whatever else is sent for it)."""
        if self._enabled and event_id not in self._answered:
            self._answered.add(event_id)
            self._push("done", room_id, event_id)

    def settled(self, room_id: RoomId, event_id: EventId, *, failed: bool = False) -> None:
        """It is done (acknowledged): ✅ unless its reply went out already (then it has
        one); ❌ when it was given up on (`failed`: refused for good, parked)."""
        order = self._order.get(room_id, [])
        if event_id not in order:
            return  # never taken (a reaction that answered a prompt): nothing to mark
        order.remove(event_id)
        if not order:
            self._order.pop(room_id, None)
        if event_id in self._answered:
            self._answered.discard(event_id)
        elif self._enabled:
            self._push("failed" if failed else "done", room_id, event_id)

    def _push(self, step: Step, room_id: RoomId, event_id: EventId) -> None:
        self._queue.append((step, room_id, event_id))
        waiting = self._waiting
        if step != "taken" and waiting is not None and waiting[0] == event_id:
            waiting[1].cancel()  # its 👀 would come and go at once: left out
        self._wakeup.set()

    def _superseded(self, event_id: EventId) -> bool:
        """Its final mark is queued already (the reply went out before its 👀 could)."""
        return any(step != "taken" and queued == event_id for step, _, queued in self._queue)

    async def run(self, client: AsyncClient) -> None:
        """Send the queued marks in order while connected (what is left waits for the next
        connection)."""
        while True:
            while self._queue:
                step, room_id, event_id = self._queue[0]
                await self._mark(client, step, room_id, event_id)
                self._queue.popleft()
            self._wakeup = anyio.Event()
            await self._wakeup.wait()

    async def _mark(
        self, client: AsyncClient, step: Step, room_id: RoomId, event_id: EventId
    ) -> None:
        if step == "taken":
            if self._receipts:
                await read_receipt(client, room_id, event_id)
            if self._enabled:
                self._placed[event_id] = await self._take_mark(client, room_id, event_id)
            return
        placed = self._placed.pop(event_id, None)
        if not self._enabled:
            return
        if placed is not None:
            await unreact(client, room_id, placed)
        await self._react(client, room_id, event_id, step)

    async def _take_mark(
        self, client: AsyncClient, room_id: RoomId, event_id: EventId
    ) -> EventId | None:
        """👀 once the rate budget has a token for it, unless the message's final mark came
        first: then 👀 is left out (and with it the redaction it would need)."""
        with anyio.CancelScope() as scope:
            self._waiting = (event_id, scope)
            if not self._superseded(event_id):
                await budget_for(client).ready(Priority.REACTION)
        self._waiting = None
        if scope.cancel_called or self._superseded(event_id):
            self.skipped += 1
            log.debug("matrix_status_reaction_skipped", room=room_id, reason="answered first")
            return None
        return await self._react(client, room_id, event_id, "taken")

    async def _react(
        self, client: AsyncClient, room_id: RoomId, event_id: EventId, step: Step
    ) -> EventId | None:
        key = getattr(self._keys, step)
        return await react(
            client,
            room_id,
            event_id,
            key,
            device_trust=self._device_trust,
            apply_trust=self._apply_trust,
        )
