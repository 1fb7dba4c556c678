"""A place under the concurrency cap on turns (`TurnSlot`) and the count of messages in
flight (`InFlight`): what the router's queue (core/router.py) and the settlement of each
message (core/settlement.py) share.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

__all__ = ["InFlight", "TurnSlot"]


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


class InFlight:
    """How many messages are being handled; `idle` is set whenever none is. A message
    waiting for a retry is not in flight (`paused`): a shutdown need not wait for it."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = anyio.Event()
        self._idle.set()

    def enter(self) -> None:
        self.count += 1
        if self._idle.is_set():
            self._idle = anyio.Event()

    def leave(self) -> None:
        self.count -= 1
        if not self.count:
            self._idle.set()

    async def wait_idle(self) -> None:
        while self.count:
            await self._idle.wait()

    async def paused(self, sleep: Callable[[float], Awaitable[None]], delay: float) -> None:
        """Sleep `delay` seconds out of flight."""
        self.leave()
        try:
            await sleep(delay)
        finally:
            self.enter()
