"""The one retry schedule every loop uses: capped exponential delays with jitter.

`Backoff` says how long the n-th consecutive failure waits; `Failures` counts them for one
loop and forgets them once the loop stayed healthy for a while, so a child that ran for an
hour and then lost its connection starts again at the short delay instead of the long one.
The supervisor, both channels' reconnect and acknowledgement loops, the router's delivery
retries and the LLM adapter all take their delays from here.

`reconnecting` is the one reconnect loop both channels run (Matrix's sync, email's IMAP
folder): it runs one attempt after the other, waits the next delay after a
`TransientError`, says so through `on_retry` (the channel's log line and state), marks the
loop up after an attempt that returned and lets anything else (a `PermanentError`) out.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NoReturn

import anyio

from squidd.errors import TransientError

__all__ = ["Backoff", "Failures", "reconnecting"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Capped exponential delays with jitter: attempt n waits in [d/2, d], d = initial * 2**(n-1).

    Half of the delay is kept fixed so a flapping loop cannot retry in a tight loop even with
    unlucky jitter; the other half spreads retries of loops that failed together.
    """

    initial_s: float
    maximum_s: float
    jitter: Callable[[], float] = random.random

    def delay(self, attempt: int) -> float:
        base = min(self.maximum_s, self.initial_s * (2 ** max(0, attempt - 1)))
        return float(base / 2 + base / 2 * self.jitter())


class Failures:
    """Consecutive failures of one loop, reset once it stayed up `healthy_after_s`.

    Call `up()` when the loop is working again (connected, a request went through) and
    `next_delay()` after each failure: it counts the failure and returns how long to wait.
    """

    __slots__ = ("_backoff", "_healthy_after_s", "_monotonic", "_up_since", "count")

    def __init__(
        self,
        backoff: Backoff,
        *,
        healthy_after_s: float = 0.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._backoff = backoff
        self._healthy_after_s = healthy_after_s
        self._monotonic = monotonic
        self._up_since: float | None = None
        self.count = 0

    def up(self) -> None:
        """The loop works again; with no healthy period configured the count resets now."""
        if self._up_since is None:
            self._up_since = self._monotonic()
        if self._healthy_after_s <= 0:
            self.count = 0

    def next_delay(self) -> float:
        """Count one more failure and return the delay before the next attempt."""
        if (
            self._up_since is not None
            and self._monotonic() - self._up_since >= self._healthy_after_s
        ):
            # It was healthy for a while: a fresh failure, not a flapping loop.
            self.count = 0
        self._up_since = None
        self.count += 1
        return self._backoff.delay(self.count)


async def reconnecting(
    attempt: Callable[[], Awaitable[None]],
    failures: Failures,
    *,
    on_retry: Callable[[TransientError, float], None],
    on_recovered: Callable[[int], None] = lambda failed: None,
) -> NoReturn:
    """Run `attempt` again and again, forever.

    After a `TransientError`: count it, call `on_retry(error, delay)` (which may re-raise
    the error to stop here) and sleep the delay. After an attempt that returned: call
    `on_recovered(n)` if n failures came before it, then `failures.up()`. An attempt that
    holds a connection for long calls `failures.up()` itself once it is connected. Any other
    exception ends the loop.
    """
    while True:
        try:
            await attempt()
        except TransientError as exc:
            delay = failures.next_delay()
            on_retry(exc, delay)
            await anyio.sleep(delay)
            continue
        if failures.count:
            on_recovered(failures.count)
        failures.up()
