"""The router's small parts: a place under the turn cap, a session's queue, a channel's
inbox, a turn's failure turned into an apology, and telling a message's source that it is
done.

Kept apart from `core/router.py` so the router module holds the per-message steps only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import anyio
import structlog

from squidd.core.models import Inbound
from squidd.core.poison import PoisonGuard
from squidd.core.ports import ChannelState
from squidd.core.reply_files import Reply
from squidd.core.supervisor import ChildHealth
from squidd.errors import LLMError, StorageError

__all__ = [
    "CRASH_APOLOGY",
    "ChannelInbox",
    "Refused",
    "SessionQueue",
    "TurnSlot",
    "Undeliverable",
    "acknowledge",
    "attempt_key",
    "give_up",
    "run_or_apologise",
]

log = structlog.get_logger()


class Undeliverable(Exception):
    """No channel of that name is running; the message stays unacknowledged (and its reply
    in the outbox) for a later start that has the channel."""


class Refused(Exception):
    """The channel refused the reply for good: the delivery ends as failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TurnSlot:
    """A place under the concurrency cap, held from before a turn until it is released
    (once the reply is ready) or the message is done, whichever comes first."""

    __slots__ = ("_held", "_limiter")

    def __init__(self, limiter: anyio.CapacityLimiter) -> None:
        self._limiter = limiter
        self._held = False

    async def __aenter__(self) -> TurnSlot:
        await self._limiter.acquire()
        self._held = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    @property
    def held(self) -> bool:
        return self._held

    def release(self) -> None:
        if self._held:
            self._held = False
            self._limiter.release()


class SessionQueue:
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
    return f"{inbound.channel}\0{inbound.record}"


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
