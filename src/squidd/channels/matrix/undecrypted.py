"""Encrypted events held back until their room key arrives, then delivered or given up.

An allowed user's event that cannot be decrypted yet keeps its sync batch open (the sync
position does not move past it) and a room key is requested. After every batch the held
events are tried again: one that opens is handed on (a message to the inbox, a
verification step to its flow); one still closed
after `decrypt_wait_s` is logged and let go, so a lost key never holds the position back
for ever. An event no key can ever open (`e2ee.malformed_megolm`) is not held at all. One
that opens but fails to be handed on with a defect is held again and, after
`gateway.max_attempts` such failures, parked (core/poison.py: the router's rule and folder).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from nio import AsyncClient, MegolmEvent

from squidd.channels.matrix import e2ee
from squidd.channels.matrix.client import call
from squidd.channels.matrix.errors import describe
from squidd.channels.matrix.ids import EventId, RoomId
from squidd.channels.matrix.policy import CHANNEL, Policy
from squidd.channels.matrix.state import Batch, SyncLedger
from squidd.core.models import ChannelName
from squidd.core.poison import Parked, PoisonGuard, is_passing, parked_id
from squidd.core.poison import describe as describe_exc
from squidd.core.ports import Inbox
from squidd.errors import SquiddError, TransientError

log = structlog.get_logger()

PARK_LOOP = "undecrypted"
"""The loop's name on the items it parks and in its attempt keys."""

# Hand a decrypted text message on: (batch, room id, event) -> whether the inbox took it.
Deliver = Callable[[Batch, RoomId, Any], Awaitable[bool]]


@dataclass(slots=True)
class _Held:
    room_id: RoomId
    event: MegolmEvent
    batch: Batch
    first_seen: float


class Undecrypted:
    """The events waiting for their keys, by event id."""

    def __init__(
        self, *, wait_s: float, monotonic: Callable[[], float], channel: str = CHANNEL
    ) -> None:
        self._channel = ChannelName(channel)
        self._wait_s = wait_s
        self._monotonic = monotonic
        self._held: dict[EventId, _Held] = {}

    async def hold(
        self,
        client: AsyncClient,
        policy: Policy,
        ledger: SyncLedger,
        batch: Batch,
        room_id: RoomId,
        event: Any,
    ) -> None:
        """Hold back an event nio could not decrypt, if its sender is one we answer."""
        sender: str = event.sender
        if sender == client.user_id or not policy.user_allowed(sender):
            log.debug("matrix_message_ignored", sender=sender, reason="undecryptable, not allowed")
            return
        malformed = e2ee.malformed_megolm(event)
        if malformed is not None:
            # No key will ever open it: not held back, no key requests for made-up sessions.
            log.warning("matrix_undecryptable_malformed", sender=sender, reason=malformed)
            return
        reason = e2ee.undecryptable_reason(client, event)
        log.warning(
            "matrix_undecryptable",
            sender=sender,
            session_id=getattr(event, "session_id", ""),
            reason=reason,
            wait_s=self._wait_s,
        )
        ledger.add(batch, event.event_id)
        self._held[event.event_id] = _Held(room_id, event, batch, self._monotonic())
        if client.olm is not None:
            try:
                await call("requesting a room key", client.request_room_key(event))
            except TransientError:
                raise
            except Exception as exc:  # noqa: BLE001 - nio refuses duplicate requests this way
                log.debug("matrix_room_key_request_skipped", reason=describe(exc))

    async def retry(
        self, client: AsyncClient, ledger: SyncLedger, deliver: Deliver, inbox: Inbox
    ) -> None:
        """Deliver what opens now; give up on what waited `wait_s` (either acks its event).
        A defect while handing one on is counted and parked by `inbox.poison`."""
        now = self._monotonic()
        for event_id, item in list(self._held.items()):
            decrypted = e2ee.try_decrypt(client, item.event)
            if decrypted is not None:
                del self._held[event_id]
                log.info("matrix_decrypted_late", room=item.room_id, event_id=event_id)
                await self._hand_on(event_id, item, decrypted, ledger, deliver, inbox.poison)
            elif now - item.first_seen >= self._wait_s:
                del self._held[event_id]
                log.warning(
                    "matrix_undecryptable_given_up",
                    room=item.room_id,
                    event_id=event_id,
                    sender=item.event.sender,
                    reason=e2ee.undecryptable_reason(client, item.event),
                )
                await ledger.ack(item.batch, event_id)

    async def _hand_on(
        self,
        event_id: EventId,
        item: _Held,
        decrypted: Any,
        ledger: SyncLedger,
        deliver: Deliver,
        poison: PoisonGuard,
    ) -> None:
        """Hand on an event that opened late. A defect while doing so (not a passing error)
        holds it again for the next batch, counted by the router's rule (core/poison.py):
        after `max_attempts` it is parked and let go, so it neither stops the sync loop nor
        is retried for ever."""
        key = f"{PARK_LOOP}\0{event_id}"
        attempt = await poison.begin(key)
        if attempt is None:  # the earlier attempts never ended: the process died in each
            await self._park(event_id, item, poison, "Interrupted", "the daemon stopped", 0)
            await ledger.ack(item.batch, event_id)
            return
        try:
            delivered = await deliver(item.batch, item.room_id, decrypted)
        except Exception as exc:
            if isinstance(exc, SquiddError) or is_passing(exc):
                await poison.passed(key, attempt)
                raise
            if not await poison.failed(key, attempt, exc):
                log.warning(
                    "matrix_decrypted_late_failed",
                    event_id=event_id,
                    attempt=attempt,
                    error=type(exc).__name__,
                )
                self._held[event_id] = item  # again after the next batch
                return
            await self._park(event_id, item, poison, type(exc).__name__, describe_exc(exc), attempt)
            await ledger.ack(item.batch, event_id)
            return
        await poison.done(key)
        if not delivered:  # else the router's ack of the message settles it
            await ledger.ack(item.batch, event_id)

    async def _park(
        self,
        event_id: EventId,
        item: _Held,
        poison: PoisonGuard,
        error: str,
        reason: str,
        attempts: int,
    ) -> None:
        # Nothing to send again: the event is kept by its ids (the sender can send it again).
        await poison.park(
            Parked(
                id=parked_id(self._channel, event_id),
                loop=PARK_LOOP,
                channel=self._channel,
                source_id=event_id,
                session_id=item.room_id,
                reason=f"{reason} (from {item.event.sender})",
                error=error,
                attempts=attempts,
            )
        )
        await poison.done(f"{PARK_LOOP}\0{event_id}")
