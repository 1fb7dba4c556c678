"""The settlement of one message: from its place in line to a delivered, acknowledged
reply, or to the dead-letter folder (the router's queue, core/router.py, hands each message
here in its session's order).

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

Poison (core/poison.py): each attempt at a message is counted on disk before it starts. A
failure not known to pass (an unexpected exception in send, compose, store) ends the attempt;
after `max_attempts` (across restarts: a message that kills the daemon too) it is parked:
kept with its reply and reason in the dead-letter folder, recorded as handled with failure,
its source told (`on_undeliverable`); its session goes on. A shutdown waits for no retry.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TypeVar

import anyio
import structlog

from squidd.core.backoff import Backoff
from squidd.core.models import Inbound, Outbound, PendingReply, utcnow
from squidd.core.poison import (
    Parked,
    PoisonGuard,
    describe,
    is_passing,
    message_key,
    parked_id,
)
from squidd.core.ports import Channel, HandledLog, Outbox
from squidd.core.reply_files import Reply
from squidd.core.supervisor import ChildHealth
from squidd.core.turn_slots import InFlight, TurnSlot
from squidd.errors import LLMError, PermanentError, StorageError

__all__ = [
    "APOLOGY",
    "CRASH_APOLOGY",
    "Refused",
    "Settlement",
    "SettlementParts",
    "TurnRunner",
    "Undeliverable",
    "acknowledge",
    "attempt_key",
    "give_up",
    "run_or_apologise",
]

log = structlog.get_logger()

T = TypeVar("T")

APOLOGY = (
    "Sorry, I could not answer this just now: the language model is not available. "
    "Please try again in a while."
)
TurnRunner = Callable[[Inbound], Awaitable[str | Reply]]
"""Runs one agent turn for an inbound message and returns the reply (text, or text and
the files the turn attached)."""


class Undeliverable(Exception):
    """No channel of that name is running; the message stays unacknowledged (and its reply
    in the outbox) for a later start that has the channel."""


class Refused(Exception):
    """The channel refused the reply for good: the delivery ends as failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class SettlementParts:
    """What settling a message works with, as the composition root builds it: the turn,
    the channels, the handled record, the outbox, the attempt counts and dead letters, each
    channel's health, the delivery retry schedule (and its sleep), the apology."""

    run_turn: TurnRunner
    channels: Mapping[str, Channel]
    handled: HandledLog
    outbox: Outbox
    poison: PoisonGuard
    health_of: Callable[[str], ChildHealth]
    delivery_backoff: Backoff
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    apology: str = APOLOGY


class Settlement:
    """Each message's way from its turn to its acknowledgement (see the module), under the
    router's turn cap (`limiter`) and count of messages in flight."""

    def __init__(
        self, parts: SettlementParts, *, limiter: anyio.CapacityLimiter, in_flight: InFlight
    ) -> None:
        self._run_turn = parts.run_turn
        self._channels = parts.channels
        self._handled = parts.handled
        self._outbox = parts.outbox
        self._poison = parts.poison
        self._health_of = parts.health_of
        self._delivery_backoff = parts.delivery_backoff
        self._sleep = parts.sleep
        self._apology = parts.apology
        self._limiter = limiter
        self._in_flight = in_flight
        self.last_turn_at: datetime | None = None

    async def handle(self, inbound: Inbound, slot: TurnSlot) -> None:
        """Settle `inbound` (its slot held); never raises but for cancellation."""
        with structlog.contextvars.bound_contextvars(
            channel=inbound.channel, session=inbound.session_id, message_id=inbound.source_id
        ):
            try:
                if not await self._redelivered(inbound):
                    await self._attempts(inbound, slot)
            except Undeliverable:
                return
            except Exception:  # the per-message boundary: log it, leave the message unacked
                log.exception("message_failed")

    async def _redelivered(self, inbound: Inbound) -> bool:
        """Settle a message recorded as handled already (a redelivery); else False."""
        channel, record = inbound.channel, inbound.record
        if not await self._handled.contains(channel, record):
            return False
        # A crash between recording and cleaning up may have left these behind.
        await self._outbox.remove(channel, record)
        await self._stored(lambda: self._poison.done(attempt_key(inbound)))
        if await self._handled.failed(channel, record):
            log.info("redelivery_skipped", outcome="undeliverable")
            await give_up(inbound, "the reply was refused before")
        else:
            log.info("redelivery_skipped")
            await acknowledge(inbound)
        return True

    async def _attempts(self, inbound: Inbound, slot: TurnSlot) -> None:
        """Attempt the message until it is done, a passing failure leaves it for later, or
        the same defect came `max_attempts` times (counted across restarts): then park it."""
        key = attempt_key(inbound)
        while True:
            attempt = await self._stored(partial(self._poison.begin, key))
            if attempt is None:  # the earlier attempts never ended: the daemon died in each
                count, reason = await self._poison.last_reason(key)
                reason = reason or f"the daemon stopped during each of {count} attempts"
                await self._park(inbound, reason, "Interrupted", count)
                return
            try:
                if slot.held:
                    await self._attempt(inbound, slot)
                else:
                    async with TurnSlot(self._limiter) as again:
                        await self._attempt(inbound, again)
            except anyio.get_cancelled_exc_class():
                # A shutdown is not the message's fault.
                with anyio.CancelScope(shield=True), contextlib.suppress(StorageError):
                    await self._poison.passed(key, attempt)
                raise
            except Exception as exc:
                if isinstance(exc, Undeliverable) or is_passing(exc):
                    await self._stored(partial(self._poison.passed, key, attempt))
                    raise
                if await self._stored(partial(self._poison.failed, key, attempt, exc)):
                    await self._park(inbound, describe(exc), type(exc).__name__, attempt)
                    return
                delay = self._delivery_backoff.delay(attempt)
                log.warning(
                    "message_attempt_failed",
                    attempt=attempt,
                    max_attempts=self._poison.max_attempts,
                    error=type(exc).__name__,
                    retry_in_s=round(delay, 2),
                )
                slot.release()
                await self._pause(delay)
                continue
            await self._stored(partial(self._poison.done, key))
            return

    async def _park(self, inbound: Inbound, reason: str, error: str, attempts: int) -> None:
        """Keep the message and its reply in the dead-letter folder, record it as handled
        with failure and tell its source; its session goes on with the next message."""
        channel, record = inbound.channel, inbound.record
        try:
            reply = await self._outbox.get(channel, record)
        except Exception:  # noqa: BLE001 - an unreadable entry may be why it is parked
            reply = None
        item = Parked(
            id=parked_id(channel, inbound.source_id),
            loop="message",
            channel=channel,
            source_id=inbound.source_id,
            session_id=inbound.session_id,
            reason=reason,
            error=error,
            attempts=attempts,
            inbound=inbound,
            reply=reply,
        )
        await self._stored(lambda: self._poison.park(item))
        await self._stored(lambda: self._handled.add(channel, record, failed=True))
        await self._stored(lambda: self._outbox.remove(channel, record))
        await self._stored(lambda: self._poison.done(attempt_key(inbound)))
        await give_up(inbound, f"parked after {attempts} failed attempts: {reason}")

    async def _attempt(self, inbound: Inbound, slot: TurnSlot) -> None:
        channel, source_id = inbound.channel, inbound.record
        pending = await self._outbox.get(channel, source_id)
        if pending is not None:
            log.info("reply_resumed_from_outbox", to=f"{pending.channel}:{pending.target}")
        else:
            started = time.monotonic()
            reply = await run_or_apologise(self._run_turn, inbound, self._apology)
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
            await self.deliver(inbound, pending)
        except Refused as refused:
            await self._stored(lambda: self._handled.add(channel, source_id, failed=True))
            await self._stored(lambda: self._outbox.remove(channel, source_id))
            await give_up(inbound, refused.reason)
            return
        await self._stored(lambda: self._handled.add(channel, source_id))
        await self._stored(lambda: self._outbox.remove(channel, source_id))
        await acknowledge(inbound)

    async def deliver(
        self, inbound: Inbound, pending: PendingReply, reactions: tuple[str, ...] = ()
    ) -> None:
        """Send `pending` (a reply to `inbound`, or an approval prompt: core/prompts.py) with
        the retries above; raises `Refused` for a permanent refusal, `Undeliverable` when its
        channel is not running."""
        outbound = Outbound(
            channel=pending.channel,
            target=pending.target,
            text=pending.text,
            session_id=pending.session_id,
            in_reply_to=inbound if pending.channel == inbound.channel else None,
            subject=pending.subject,
            files=pending.files,
            reactions=reactions,
        )
        failures = 0
        while True:
            channel = self._channels.get(pending.channel)
            if channel is None:
                log.error("reply_undeliverable", reason="channel not running", to=pending.channel)
                raise Undeliverable
            started = time.monotonic()
            try:
                await channel.send(outbound)
            except PermanentError as exc:
                reason = str(exc) or type(exc).__name__
                log.error(  # noqa: TRY400 - expected; the reason is enough
                    "reply_rejected", to=pending.channel, attempt=failures + 1, reason=reason
                )
                raise Refused(reason) from exc
            except Exception as exc:
                if not is_passing(exc):
                    raise  # a defect: counted by `_attempts`, parked after the last attempt
                failures += 1
                delay = self._delivery_backoff.delay(failures)
                log.warning(
                    "reply_delivery_failed",
                    to=pending.channel,
                    attempt=failures,
                    retry_in_s=round(delay, 2),
                    reason=str(exc) or type(exc).__name__,
                )
                await self._pause(delay)
                continue
            self._health_of(pending.channel).last_outbound = utcnow()
            log.info("reply_sent", to=pending.channel, ms=_ms(started), chars=len(pending.text))
            return

    async def _pause(self, delay: float) -> None:
        """Wait for a retry, not in flight: nothing is lost if a shutdown comes meanwhile."""
        await self._in_flight.paused(self._sleep, delay)

    async def _stored(self, write: Callable[[], Awaitable[T]]) -> T:
        """Run a write of the outbox, the handled record or an attempt count until it
        succeeds: a reply not kept, or kept but not recorded as sent, is lost or sent twice
        (a full disk passes; it is the disk's trouble, not the message's)."""
        failures = 0
        while True:
            try:
                return await write()
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

    async def _finish(self, inbound: Inbound) -> None:
        await self._stored(lambda: self._handled.add(inbound.channel, inbound.record))
        await acknowledge(inbound)


async def acknowledge(inbound: Inbound) -> None:
    """Tell the source the message is done (its reply was delivered, or none was due)."""
    try:
        await inbound.ack()
    except Exception as exc:  # noqa: BLE001 - handled is recorded: no second answer
        log.warning("ack_failed", reason=str(exc) or type(exc).__name__)


async def give_up(inbound: Inbound, reason: str) -> None:
    """Tell the source the message is done without an answer (or `ack` it when the
    channel has no such notion)."""
    if inbound.on_undeliverable is None:
        await acknowledge(inbound)
        return
    try:
        await inbound.on_undeliverable(reason)
    except Exception as exc:  # noqa: BLE001 - recorded as failed: never a second answer
        log.warning("undeliverable_mark_failed", reason=str(exc) or type(exc).__name__)


def attempt_key(inbound: Inbound) -> str:
    """The key of a message's attempt count (core/poison.py): its channel and record id."""
    return message_key(inbound.channel, inbound.record)


CRASH_APOLOGY = (
    "Sorry, something went wrong on my side while answering this. The error is in my log; "
    "please try again in a while."
)


async def run_or_apologise(
    run_turn: Callable[[Inbound], Awaitable[str | Reply]], inbound: Inbound, apology: str
) -> Reply:
    """The turn's reply; a turn that failed is answered with an apology, not retried: the
    model down after its retries gets `apology`, a full disk or a crash `CRASH_APOLOGY`."""
    try:
        answer = await run_turn(inbound)
    except LLMError as exc:
        log.error("turn_failed", reason=str(exc), error=type(exc).__name__)  # noqa: TRY400 - expected; the reason is enough
        return Reply(apology)
    except StorageError as exc:  # a full or broken disk: said in the log, not a crash
        log.error("turn_failed", reason=str(exc), error=type(exc).__name__)  # noqa: TRY400 - expected; the reason is enough
        return Reply(CRASH_APOLOGY)
    except Exception:
        log.exception("turn_crashed")
        return Reply(CRASH_APOLOGY)
    return Reply(answer) if isinstance(answer, str) else answer


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
