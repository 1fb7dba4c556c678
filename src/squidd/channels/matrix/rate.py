"""One rate budget per Matrix account: what the homeserver's event limit lets the bot send.

Synapse counts every event a user sends against one `rc_message` bucket per user: messages,
edits, reactions, redactions (and joins); read receipts, typing notices, to-device messages
and key uploads are not counted. `RateBudget` is a token bucket shaped like it (`per_second`
refill, `burst` tokens, by default Synapse's own 0.2/s and 10), shared by every room and
every sending path of one account, and kept by the channel across reconnects (`Carried`).

Who goes first when tokens are short (`Priority`): replies (final answers, approval
prompts, the final edit of a streamed answer) wait for a token ahead of everything; the
✅ ♾️ ❌ offered on a prompt (the person's buttons) next; then the status reactions (✅ ❌
👀 and their redactions); streaming edits never wait: an edit is sent only while
`edit_reserve` tokens would be left for the others, else it is skipped (`Unaffordable`) and
its text goes out with a later edit or the final one.

Two corrections keep the model at or below the server's count: a request is counted as if
the server saw it when its answer came back (the latest it can have), and a 429 empties the
bucket until its `retry_after_ms` has passed (`limited`, fed from nio's response callbacks;
nio itself waits `retry_after_ms` and sends again, a request the empty bucket accounts for).
A `per_second` of 0 turns the budget off (a homeserver without limits for the bot).
"""

from __future__ import annotations

import heapq
import itertools
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from enum import IntEnum
from typing import Any

import anyio
import structlog
from nio import AsyncClient, ErrorResponse

log = structlog.get_logger()

__all__ = ["Priority", "RateBudget", "Unaffordable", "bind", "budget_for"]

SYNAPSE_RATE, SYNAPSE_BURST = 0.2, 10  # Synapse's default rc_message
EDIT_RESERVE = 3  # a reply, a redaction and a ✅: what an answer's end costs


class Priority(IntEnum):
    """Lower goes first."""

    REPLY = 0
    OFFER = 1  # the ✅ ♾️ ❌ put on an approval prompt: the person's buttons
    REACTION = 2  # the status marks and their redactions
    EDIT = 3


class Unaffordable(Exception):
    """An edit the budget cannot pay for now: skip it, a later one carries its text."""


class RateBudget:
    """A token bucket of `burst` tokens refilled at `per_second`, waiters served by priority."""

    def __init__(
        self,
        per_second: float = SYNAPSE_RATE,
        burst: int = SYNAPSE_BURST,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.rate = per_second
        self.burst = max(1, burst)
        self.edit_reserve = min(EDIT_RESERVE, self.burst - 1)
        self._monotonic = monotonic
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._stamp = monotonic()
        self._limited_at = float("-inf")
        self._waiters: list[tuple[int, int]] = []  # a heap of (priority, arrival)
        self._arrivals = itertools.count()
        self._changed = anyio.Event()
        self.spent = 0
        self.waited = 0
        self.skipped = 0
        self.refused = 0

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def level(self) -> float:
        """Tokens in the bucket now (below zero after a 429, until its retry time)."""
        now = self._monotonic()
        if now > self._stamp:
            self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
        return self._tokens

    def affordable(self, priority: Priority) -> bool:
        """Whether `priority` may have a token now: one is there (for an edit, with
        `edit_reserve` more left), and no one as urgent waits for it."""
        if not self.enabled:
            return True
        if self._waiters and self._waiters[0][0] <= priority:
            return False
        reserve = self.edit_reserve if priority is Priority.EDIT else 0
        return self.level() >= 1 + reserve

    def try_take(self, priority: Priority) -> bool:
        """Take a token if `priority` may have one now, without waiting."""
        if not self.affordable(priority):
            return False
        self._charge()
        return True

    async def take(self, priority: Priority) -> None:
        """Wait for a token, behind every waiter of a higher (or the same, earlier) priority."""
        await self.ready(priority)
        self._charge()

    def _charge(self) -> None:
        if self.enabled:
            self._tokens -= 1
            self.spent += 1

    async def ready(self, priority: Priority) -> None:
        """Wait until `priority` may have a token (taken by `take`, not by this)."""
        if self.affordable(priority):
            return
        ticket = (int(priority), next(self._arrivals))
        heapq.heappush(self._waiters, ticket)
        self._notify()
        self.waited += 1
        try:
            while True:
                changed = self._changed
                delay: float | None = None
                if self._waiters[0] == ticket:
                    missing = 1 - self.level()
                    if missing <= 1e-6:  # float and clock rounding, microseconds at most
                        break
                    delay = missing / self.rate
                await self._wait(changed, delay)
        finally:
            self._waiters.remove(ticket)
            heapq.heapify(self._waiters)
            self._notify()

    @asynccontextmanager
    async def spend(self, priority: Priority) -> AsyncIterator[None]:
        """One request: a token taken before (an edit raises `Unaffordable` rather than
        wait), counted after as sent when its answer came."""
        if priority is Priority.EDIT:
            if not self.try_take(priority):
                self.skipped += 1
                raise Unaffordable("no token for an edit now")
        else:
            await self.take(priority)
        started = self._monotonic()
        try:
            yield
        finally:
            self.settle(started)

    def limited(self, retry_after_s: float) -> None:
        """The homeserver answered 429: nothing more until `retry_after_s` has passed."""
        if not self.enabled:
            return
        self.refused += 1
        level = self.level()
        self._limited_at = self._stamp
        self._tokens = min(level, -max(retry_after_s, 0.0) * self.rate)
        log.info("matrix_rate_limited", retry_after_s=round(retry_after_s, 3))
        self._notify()

    def settle(self, started: float) -> None:
        """Take back the refill credited while a request was on its way: the server may
        have counted it only when it answered."""
        if not self.enabled:
            return
        level = self.level()
        flight = self._stamp - max(started, self._limited_at)
        if flight > 0:
            self._tokens = level - flight * self.rate

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def _wait(self, changed: anyio.Event, delay: float | None) -> None:
        if delay is None:
            await changed.wait()
            return
        async with anyio.create_task_group() as tg:

            async def timer() -> None:
                await self._sleep(delay)
                tg.cancel_scope.cancel()

            tg.start_soon(timer)
            await changed.wait()
            tg.cancel_scope.cancel()


_BUDGETS: weakref.WeakKeyDictionary[AsyncClient, RateBudget] = weakref.WeakKeyDictionary()
_UNLIMITED = RateBudget(0)


def budget_for(client: AsyncClient) -> RateBudget:
    """The budget of `client`'s account (no limit for a client never bound to one)."""
    return _BUDGETS.get(client, _UNLIMITED)


def bind(client: AsyncClient, budget: RateBudget) -> None:
    """Make `budget` the one every send of `client` spends from, and feed it the 429s."""
    _BUDGETS[client] = budget

    def on_error(response: Any) -> None:
        status = getattr(getattr(response, "transport_response", None), "status", None)
        if response.status_code in ("M_LIMIT_EXCEEDED", 429) or status == 429:
            # nio waits the same time (5 s when the server named none), then sends again.
            retry_ms = getattr(response, "retry_after_ms", None) or 5_000
            budget.limited(retry_ms / 1000)

    client.add_response_callback(on_error, ErrorResponse)
