"""Poison parking: what every retrying loop does with a failure that will not pass.

A failure is retried without limit only when it is known to pass (`is_passing`): a
`TransientError` (a `DeliveryError`, the model being down, an SMTP 4xx), a connection
error, a timeout. Anything else that fails on an input (an unexpected exception in
compose, send, the turn or the store) is a defect that a retry is unlikely to cure: it is
retried at most `max_attempts` times, then the input is *parked*: kept with the reason in
the dead-letter folder (`store/parked.py`), recorded as handled-with-failure by its loop,
logged once at error level with the exception's type, and never tried again on its own.
`squidd parked retry ID` sends it again after a fix.

The attempt count is persisted *before* each attempt (`AttemptLog`), so an input that kills
the whole daemon (a crash in a C library, the OOM killer) is counted across restarts as well:
after `max_attempts` interrupted attempts it is parked without a further one. An attempt that
ended for a passing reason, or was cancelled by a shutdown, is taken back (`passed`).

One mechanism for every loop that retries: the router (inbound handling and delivery, cron
and heartbeat runs, runs resumed after a restart: they all go through it) and the Matrix
channel's queue of undecrypted events use `PoisonGuard`; only the keys differ.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

import structlog

from squidd.core.models import (
    Inbound,
    PendingReply,
    utcnow,
)
from squidd.errors import TransientError

__all__ = [
    "PASSING_ERRORS",
    "AttemptLog",
    "DeadLetters",
    "ParkState",
    "Parked",
    "PoisonGuard",
    "describe",
    "is_passing",
    "message_key",
    "parked_id",
]

log = structlog.get_logger()

DEFAULT_MAX_ATTEMPTS = 3

PASSING_ERRORS: tuple[type[BaseException], ...] = (TransientError, ConnectionError, TimeoutError)
"""Failures known to pass with time. Adapters type their library's passing errors as
`TransientError` (or a subclass) at their edge; these are the only ones retried unbounded."""

_REASON_CHARS = 500


def is_passing(exc: BaseException) -> bool:
    """Whether `exc` is known to pass (retry, do not count it) or a defect (count it; park
    after the limit). The one place that decides: a table of library errors plugs in here."""
    return isinstance(exc, PASSING_ERRORS)


def describe(exc: BaseException) -> str:
    """The exception as a reason to keep with a parked item: its type and its message, cut."""
    text = " ".join(str(exc).split())
    reason = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return reason if len(reason) <= _REASON_CHARS else reason[: _REASON_CHARS - 1] + "…"


def message_key(channel: str, source_id: str) -> str:
    """The key of a message's attempt count: its channel and source (record) id."""
    return f"{channel}\0{source_id}"


def parked_id(channel: str, source_id: str) -> str:
    """A short id for the parked item of (channel, source id), the same every time, so a
    crash between parking and recording it parks the same item again, not a second one."""
    digest = hashlib.sha256(f"{channel}\0{source_id}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:12]


class ParkState(StrEnum):
    PARKED = "parked"
    RETRY = "retry"
    """`squidd parked retry` asked for it; the daemon has not taken it yet."""
    RETRYING = "retrying"
    """The daemon is sending it again (after a crash it takes it again, under the same key)."""


@dataclass(frozen=True, slots=True)
class Parked:
    """One parked input, as the dead-letter folder keeps it.

    `loop` names the loop that parked it ("message": the router; "undecrypted": the Matrix
    queue of events waiting for their keys). `inbound` is the message to run again (kept
    on disk without its hooks: a retry gives its own) and `reply` the reply that could not
    be delivered, if there was one. `retries` counts the operator's retries so far.
    """

    id: str
    loop: str
    channel: str
    source_id: str
    session_id: str
    reason: str
    error: str
    attempts: int
    parked_at: datetime = field(default_factory=utcnow)
    inbound: Inbound | None = None
    reply: PendingReply | None = None
    state: ParkState = ParkState.PARKED
    retries: int = 0

    @property
    def retryable(self) -> bool:
        return self.inbound is not None

    def with_state(self, state: ParkState, **changes: Any) -> Parked:
        return replace(self, state=state, **changes)


class AttemptLog(Protocol):
    """Attempt counts per input key, kept across restarts (`store/attempts.py`)."""

    async def get(self, key: str) -> tuple[int, str]:
        """The attempts counted and the last failure's reason; (0, "") for none."""
        ...

    async def set(self, key: str, count: int, reason: str) -> None: ...

    async def clear(self, key: str) -> None: ...


class DeadLetters(Protocol):
    """The dead-letter folder (`store/parked.py`): parked inputs, kept until dropped."""

    async def park(self, item: Parked) -> None:
        """Keep `item` durably; an item with the same id is replaced, its `retries` kept."""
        ...


class PoisonGuard:
    """Counts the attempts on one input (persisted before each) and parks it after
    `max_attempts` defects. Keys are `"<channel>\\0<id>"` strings chosen by the loop."""

    def __init__(
        self,
        attempts: AttemptLog,
        dead_letters: DeadLetters,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self._attempts = attempts
        self._dead_letters = dead_letters
        self.max_attempts = max_attempts

    async def begin(self, key: str) -> int | None:
        """Count one more attempt, durably, before it runs; its number, or None when the
        limit was reached already (the earlier attempts never ended: park it now)."""
        count, reason = await self._attempts.get(key)
        if count >= self.max_attempts:
            return None
        await self._attempts.set(key, count + 1, reason)
        return count + 1

    async def passed(self, key: str, attempt: int) -> None:
        """The attempt ended for a passing reason (or a shutdown cut it short): uncount it."""
        _, reason = await self._attempts.get(key)
        if attempt <= 1 and not reason:
            await self._attempts.clear(key)
        else:
            await self._attempts.set(key, attempt - 1, reason)

    async def failed(self, key: str, attempt: int, exc: BaseException) -> bool:
        """The attempt failed with a defect: keep the reason; True when it was the last."""
        await self._attempts.set(key, attempt, describe(exc))
        return attempt >= self.max_attempts

    async def last_reason(self, key: str) -> tuple[int, str]:
        """The attempts counted so far and the last failure's reason ("" if none was seen)."""
        return await self._attempts.get(key)

    async def done(self, key: str) -> None:
        """The input is finished (answered, refused, parked): forget its count."""
        await self._attempts.clear(key)

    async def park(self, item: Parked) -> None:
        """Keep `item` in the dead-letter folder (durably) and say so once in the log."""
        await self._dead_letters.park(item)
        log.error(
            "parked",
            parked_id=item.id,
            loop=item.loop,
            error=item.error,
            attempts=item.attempts,
            note="see `squidd parked list`",
        )
