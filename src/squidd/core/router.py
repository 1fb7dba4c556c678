"""The router: from an inbound message to a delivered, acknowledged reply.

Messages of one session are handled strictly in arrival order by one worker task; different
sessions run their turns concurrently up to a cap (a reply waiting for its channel does not
count). A session's queue and worker exist only while it has work, so memory does not grow
with the number of sessions ever seen.

Durable acknowledgement, per message:
1. a source id already recorded as handled is only acknowledged (a redelivery after a crash),
   or, when it was recorded as undeliverable, told so again (`on_undeliverable`);
2. a reply kept in the outbox (the daemon died after the turn, before delivery) is sent
   again as it was, without running the model again;
3. otherwise the turn runs; its reply goes to the outbox *before* it is sent;
4. the send is retried with capped backoff while it fails for a passing reason (a server
   down, a 4xx) or until the daemon stops; a permanent refusal (`PermanentError` from the
   channel: an unknown recipient, a message too large) ends it after that one attempt;
5. only then is the id recorded as handled (with the failure, if refused), the outbox entry
   dropped and `ack` called, or `on_undeliverable(reason)` for a refused reply, so a refused
   reply is neither retried, nor answered again, nor holding up its session or a shutdown.
A turn that fails (the model is down after its retries) is answered with a short apology.
Writes of the outbox and the handled record are retried the same way (a full disk).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from squidd.core.backoff import Backoff
from squidd.core.models import Inbound, Outbound, PendingReply, SessionId, utcnow
from squidd.core.ports import Channel, ChannelState, HandledLog, Outbox
from squidd.core.reply_files import Reply
from squidd.core.supervisor import ChildHealth
from squidd.errors import LLMError, PermanentError, StorageError

log = structlog.get_logger()

APOLOGY = (
    "Sorry, I could not answer this just now: the language model is not available. "
    "Please try again in a while."
)
CRASH_APOLOGY = (
    "Sorry, something went wrong on my side while answering this. The error is in my log; "
    "please try again in a while."
)
TurnRunner = Callable[[Inbound], Awaitable[str | Reply]]
"""Runs one agent turn for an inbound message and returns the reply (text, or text and
the files the turn attached)."""


class _Undeliverable(Exception):
    """No channel of that name is running; the message stays unacknowledged (and its reply
    in the outbox) for a later start that has the channel."""


class _Refused(Exception):
    """The channel refused the reply for good: the delivery ends as failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _TurnSlot:
    """A place under the concurrency cap, held from before a turn until it is released
    (once the reply is ready) or the message is done, whichever comes first."""

    __slots__ = ("_held", "_limiter")

    def __init__(self, limiter: anyio.CapacityLimiter) -> None:
        self._limiter = limiter
        self._held = False

    async def __aenter__(self) -> _TurnSlot:
        await self._limiter.acquire()
        self._held = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        if self._held:
            self._held = False
            self._limiter.release()


class _SessionQueue:
    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: deque[Inbound] = deque()


class _ChannelInbox:
    """The `Inbox` a channel's receive loop gets: hands messages to the router and reports
    the channel's state for `squidd status`."""

    def __init__(self, router: Router, name: str, health: ChildHealth) -> None:
        self._router = router
        self._name = name
        self._health = health

    async def put(self, message: Inbound) -> None:
        await self._router.submit(message.cleaned())

    def report(self, state: ChannelState, detail: str = "") -> None:
        if state != self._health.state or detail != self._health.detail:
            log.info("channel_state", channel=self._name, state=str(state), detail=detail)
        self._health.set(state, detail)


class Router:
    """Per-session ordering, a global concurrency cap, and acknowledgement after delivery."""

    def __init__(
        self,
        *,
        run_turn: TurnRunner,
        channels: Mapping[str, Channel],
        handled: HandledLog,
        outbox: Outbox,
        health_of: Callable[[str], ChildHealth],
        max_concurrent_turns: int,
        delivery_backoff: Backoff,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        apology: str = APOLOGY,
    ) -> None:
        self._run_turn = run_turn
        self._channels = channels
        self._handled = handled
        self._outbox = outbox
        self._health_of = health_of
        self._limiter = anyio.CapacityLimiter(max_concurrent_turns)
        self._delivery_backoff = delivery_backoff
        self._sleep = sleep
        self._apology = apology
        self._sessions: dict[SessionId, _SessionQueue] = {}
        self._tg: TaskGroup | None = None
        self._accepting = True
        self._in_flight = 0
        self._queued = 0
        self._idle = anyio.Event()
        self._idle.set()
        self.last_turn_at: datetime | None = None

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
            log.info("intake_stopped", in_flight=self._in_flight, queued=self._queued)

    async def wait_idle(self) -> None:
        """Return once no turn is in flight (used for the shutdown grace period)."""
        while self._in_flight:
            await self._idle.wait()

    def stats(self) -> dict[str, int]:
        return {
            "in_flight": self._in_flight,
            "queued": self._queued,
            "sessions": len(self._sessions),
        }

    def inbox(self, channel: str) -> _ChannelInbox:
        return _ChannelInbox(self, channel, self._health_of(channel))

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
            queue = self._sessions[inbound.session_id] = _SessionQueue()
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

    async def _worker(self, session: SessionId, queue: _SessionQueue) -> None:
        # The task was started with a copy of the submitter's context: whatever that caller
        # had bound (the email channel binds the mail's uid around `put`) would stick to
        # every later message of this worker. Start clean; `_handle` binds per message.
        structlog.contextvars.clear_contextvars()
        try:
            while queue.items and self._accepting:
                async with _TurnSlot(self._limiter) as slot:
                    if self.stopping:
                        break
                    inbound = queue.items.popleft()
                    self._queued -= 1
                    self._in_flight += 1
                    if self._idle.is_set():
                        self._idle = anyio.Event()
                    try:
                        await self._handle(inbound, slot)
                    finally:
                        self._in_flight -= 1
                        if not self._in_flight:
                            self._idle.set()
        finally:
            # No await between the loop's last check and here: a message submitted for this
            # session from now on starts a new worker.
            self._queued -= len(queue.items)
            if self._sessions.get(session) is queue:
                del self._sessions[session]

    # --- one message -----------------------------------------------------------------------

    async def _handle(self, inbound: Inbound, slot: _TurnSlot) -> None:
        with structlog.contextvars.bound_contextvars(
            channel=inbound.channel, session=inbound.session_id, message_id=inbound.source_id
        ):
            try:
                await self._handle_bound(inbound, slot)
            except _Undeliverable:
                return
            except Exception:  # the per-message boundary: log it, leave the message unacked
                log.exception("message_failed")

    async def _handle_bound(self, inbound: Inbound, slot: _TurnSlot) -> None:
        channel, source_id = inbound.channel, inbound.source_id
        if await self._handled.contains(channel, source_id):
            # A crash between recording and cleaning up may have left the outbox entry.
            await self._outbox.remove(channel, source_id)
            if await self._handled.failed(channel, source_id):
                log.info("redelivery_skipped", outcome="undeliverable")
                await self._give_up(inbound, "the reply was refused before")
            else:
                log.info("redelivery_skipped")
                await self._ack(inbound)
            return
        pending = await self._outbox.get(channel, source_id)
        if pending is not None:
            log.info("reply_resumed_from_outbox", to=f"{pending.channel}:{pending.target}")
        else:
            started = time.monotonic()
            reply = await self._turn(inbound)
            text = reply.text
            self.last_turn_at = utcnow()
            destination = inbound.destination
            quiet = inbound.quiet_reply
            if quiet is not None and text.strip() == quiet and not reply.files:
                log.info("reply_suppressed", ms=_ms(started))
                await self._finish(inbound)
                return
            if destination is None or destination.channel not in self._channels:
                log.warning(
                    "reply_not_delivered",
                    reason="no running channel for the target",
                    to=str(destination) if destination else "",
                    ms=_ms(started),
                )
                await self._finish(inbound)
                return
            pending = PendingReply(
                destination.channel,
                destination.target,
                text,
                inbound.session_id,
                subject=inbound.subject,
                files=reply.files,
            )
            await self._stored(lambda: self._outbox.put(channel, source_id, pending))
            log.debug("reply_ready", ms=_ms(started))
        # The cap is on turns: delivery retries (a channel that is down) must not keep other
        # sessions from running theirs. The session stays blocked, so its order holds.
        slot.release()
        try:
            await self._deliver(inbound, pending)
        except _Refused as refused:
            await self._stored(lambda: self._handled.add(channel, source_id, failed=True))
            await self._stored(lambda: self._outbox.remove(channel, source_id))
            await self._give_up(inbound, refused.reason)
            return
        await self._stored(lambda: self._handled.add(channel, source_id))
        await self._stored(lambda: self._outbox.remove(channel, source_id))
        await self._ack(inbound)

    async def _turn(self, inbound: Inbound) -> Reply:
        try:
            answer = await self._run_turn(inbound)
        except LLMError as exc:
            log.error("turn_failed", reason=str(exc), error=type(exc).__name__)  # noqa: TRY400 - expected; the reason is enough
            return Reply(self._apology)
        except StorageError as exc:  # a full or broken disk: said in the log, not a crash
            log.error("turn_failed", reason=str(exc), error=type(exc).__name__)  # noqa: TRY400 - expected; the reason is enough
            return Reply(CRASH_APOLOGY)
        except Exception:
            log.exception("turn_crashed")
            return Reply(CRASH_APOLOGY)
        return Reply(answer) if isinstance(answer, str) else answer

    async def _deliver(self, inbound: Inbound, pending: PendingReply) -> None:
        outbound = Outbound(
            channel=pending.channel,
            target=pending.target,
            text=pending.text,
            session_id=pending.session_id,
            in_reply_to=inbound if pending.channel == inbound.channel else None,
            subject=pending.subject,
            files=pending.files,
        )
        failures = 0
        while True:
            channel = self._channels.get(pending.channel)
            if channel is None:
                log.error("reply_undeliverable", reason="channel not running", to=pending.channel)
                raise _Undeliverable
            started = time.monotonic()
            try:
                await channel.send(outbound)
            except PermanentError as exc:
                reason = str(exc) or type(exc).__name__
                log.error(  # noqa: TRY400 - expected; the reason is enough
                    "reply_rejected", to=pending.channel, attempt=failures + 1, reason=reason
                )
                raise _Refused(reason) from exc
            except Exception as exc:  # noqa: BLE001 - DeliveryError or not: retry later
                failures += 1
                delay = self._delivery_backoff.delay(failures)
                log.warning(
                    "reply_delivery_failed",
                    to=pending.channel,
                    attempt=failures,
                    retry_in_s=round(delay, 2),
                    reason=str(exc) or type(exc).__name__,
                )
                await self._sleep(delay)
                continue
            self._health_of(pending.channel).last_outbound = utcnow()
            log.info("reply_sent", to=pending.channel, ms=_ms(started), chars=len(pending.text))
            return

    async def _stored(self, write: Callable[[], Awaitable[None]]) -> None:
        """Run a write of the outbox or the handled record until it succeeds: a reply not
        kept, or kept but not recorded as sent, is lost or sent twice (a full disk passes)."""
        failures = 0
        while True:
            try:
                await write()
            except StorageError as exc:
                failures += 1
                delay = self._delivery_backoff.delay(failures)
                log.error(  # noqa: TRY400 - expected; the reason is enough
                    "storage_write_failed",
                    attempt=failures,
                    retry_in_s=round(delay, 2),
                    reason=str(exc),
                )
                await self._sleep(delay)
                continue
            return

    async def _finish(self, inbound: Inbound) -> None:
        await self._stored(lambda: self._handled.add(inbound.channel, inbound.source_id))
        await self._ack(inbound)

    async def _ack(self, inbound: Inbound) -> None:
        try:
            await inbound.ack()
        except Exception as exc:  # noqa: BLE001 - handled is recorded: no second answer
            log.warning("ack_failed", reason=str(exc) or type(exc).__name__)

    async def _give_up(self, inbound: Inbound, reason: str) -> None:
        """Tell the source the message is done without an answer (or `ack` it when the
        channel has no such notion)."""
        if inbound.on_undeliverable is None:
            await self._ack(inbound)
            return
        try:
            await inbound.on_undeliverable(reason)
        except Exception as exc:  # noqa: BLE001 - recorded as failed: never a second answer
            log.warning("undeliverable_mark_failed", reason=str(exc) or type(exc).__name__)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
