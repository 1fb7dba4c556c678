"""The router's queue: from a channel's message to its turn, in order.

Messages of one session are handled strictly in arrival order by one worker task; different
sessions run their turns concurrently up to a cap (a reply waiting for its channel does not
count). A session's queue and worker exist only while it has work, so memory does not grow
with the number of sessions ever seen. What happens to each message from there (a
redelivery skipped, the turn, the outbox, delivery with retries, the handled record, the
acknowledgement, parking) is its settlement: core/settlement.py.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from datetime import datetime

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from squidd.core.models import Inbound, PendingReply, SessionId, utcnow
from squidd.core.poison import PoisonGuard
from squidd.core.ports import ChannelState
from squidd.core.settlement import APOLOGY, Settlement, SettlementParts, TurnRunner
from squidd.core.supervisor import ChildHealth
from squidd.core.turn_slots import InFlight, TurnSlot

__all__ = ["APOLOGY", "ChannelInbox", "Router", "SessionQueue", "TurnRunner"]

log = structlog.get_logger()


class SessionQueue:
    """One session's messages waiting for its worker, oldest first."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: deque[Inbound] = deque()


class ChannelInbox:
    """The `Inbox` a channel's receive loop gets: hands messages to the router and reports
    the channel's state for `squidd status`."""

    def __init__(
        self,
        submit: Callable[[Inbound], Awaitable[None]],
        name: str,
        health: ChildHealth,
        poison: PoisonGuard,
    ) -> None:
        self._submit = submit
        self.poison = poison
        self._name = name
        self._health = health

    async def put(self, message: Inbound) -> None:
        await self._submit(message.cleaned())

    def report(self, state: ChannelState, detail: str = "") -> None:
        if state != self._health.state or detail != self._health.detail:
            log.info("channel_state", channel=self._name, state=str(state), detail=detail)
        self._health.set(state, detail)


class Router:
    """Per-session ordering, a global concurrency cap, and acknowledgement after delivery."""

    def __init__(self, parts: SettlementParts, *, max_concurrent_turns: int) -> None:
        self._poison = parts.poison
        self._health_of = parts.health_of
        self._limiter = anyio.CapacityLimiter(max_concurrent_turns)
        self._in_flight = InFlight()
        self._settlement = Settlement(parts, limiter=self._limiter, in_flight=self._in_flight)
        self._sessions: dict[SessionId, SessionQueue] = {}
        self._tg: TaskGroup | None = None
        self._accepting = True
        self._queued = 0

    # --- life cycle ------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the task group of the session workers; runs until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    @property
    def stopping(self) -> bool:
        return not self._accepting

    def stop_intake(self) -> None:
        """Stop taking messages: `submit` blocks from now on and queued messages that have not
        started are left unacknowledged, for their source to deliver again after a restart."""
        if self._accepting:
            self._accepting = False
            log.info("intake_stopped", in_flight=self._in_flight.count, queued=self._queued)

    async def wait_idle(self) -> None:
        """Return once no turn is in flight (used for the shutdown grace period)."""
        await self._in_flight.wait_idle()

    def stats(self) -> dict[str, int]:
        return {
            "in_flight": self._in_flight.count,
            "queued": self._queued,
            "sessions": len(self._sessions),
        }

    def inbox(self, channel: str) -> ChannelInbox:
        return ChannelInbox(self.submit, channel, self._health_of(channel), self._poison)

    # --- intake ----------------------------------------------------------------------------

    async def submit(self, inbound: Inbound) -> None:
        """Queue a message; returns once it is queued. The reply goes to
        `inbound.destination`."""
        tg = self._tg
        if not self._accepting or tg is None:
            # Shutting down (or not started): the caller must not ack; it is cancelled soon.
            await anyio.sleep_forever()
            return
        self._health_of(inbound.channel).last_inbound = utcnow()
        queue = self._sessions.get(inbound.session_id)
        if queue is None:
            queue = self._sessions[inbound.session_id] = SessionQueue()
            queue.items.append(inbound)
            self._queued += 1
            tg.start_soon(self._worker, inbound.session_id, queue)
        else:
            queue.items.append(inbound)
            self._queued += 1
        log.debug(
            "message_queued",
            channel=inbound.channel,
            session=inbound.session_id,
            message_id=inbound.source_id,
            position=len(queue.items),
        )

    async def _worker(self, session: SessionId, queue: SessionQueue) -> None:
        # The task was started with a copy of the submitter's context: whatever that caller
        # had bound (the email channel binds the mail's uid around `put`) would stick to
        # every later message of this worker. Start clean; the settlement binds per message.
        structlog.contextvars.clear_contextvars()
        try:
            while queue.items and self._accepting:
                async with TurnSlot(self._limiter) as slot:
                    if self.stopping:
                        break
                    inbound = queue.items.popleft()
                    self._queued -= 1
                    self._in_flight.enter()
                    try:
                        await self._settlement.handle(inbound, slot)
                    finally:
                        self._in_flight.leave()
        finally:
            # No await between the loop's last check and here: a message submitted for this
            # session from now on starts a new worker.
            self._queued -= len(queue.items)
            if self._sessions.get(session) is queue:
                del self._sessions[session]

    # --- what the settlement offers --------------------------------------------------------

    @property
    def last_turn_at(self) -> datetime | None:
        return self._settlement.last_turn_at

    async def deliver(
        self, inbound: Inbound, pending: PendingReply, reactions: tuple[str, ...] = ()
    ) -> None:
        """Send `pending` with the delivery retries (core/settlement.py `Settlement.deliver`):
        an approval prompt (core/prompts.py) goes the way replies go."""
        await self._settlement.deliver(inbound, pending, reactions)
