"""Restart-with-backoff for the daemon's long-running children, and their health states.

Every child (a channel's receive loop, the cron scheduler, the heartbeat) runs under
`Supervisor.supervise`. A child that fails with a `TransientError` (or with a bug) is restarted
after a capped exponential delay with jitter; the delay resets once the child stayed up for a
healthy period. A `PermanentError` parks the child in the failed state with its reason while
everything else keeps working. Each transition is logged and recorded in a `ChildHealth`,
which `squidd status` shows.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import anyio
import structlog
from anyio.abc import TaskStatus

from squidd.core.backoff import Backoff, Failures
from squidd.core.models import utcnow
from squidd.core.ports import ChannelState
from squidd.errors import PermanentError, TransientError

log = structlog.get_logger()


@dataclass
class ChildHealth:
    """What `squidd status` shows about one child. Mutated only by its own supervisor loop
    and the child's `report` calls, all on the event loop."""

    name: str
    state: ChannelState = ChannelState.STARTING
    detail: str = ""
    since: datetime = field(default_factory=utcnow)
    attempt: int = 0
    restarts: int = 0
    last_inbound: datetime | None = None
    last_outbound: datetime | None = None

    def set(self, state: ChannelState, detail: str = "") -> None:
        if state != self.state:
            self.since = utcnow()
        self.state = state
        self.detail = detail

    def to_dict(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        return {
            "name": self.name,
            "state": str(self.state),
            "detail": self.detail,
            "since": iso(self.since),
            "attempt": self.attempt,
            "restarts": self.restarts,
            "last_inbound": iso(self.last_inbound),
            "last_outbound": iso(self.last_outbound),
        }


class _ChildStatus:
    """The `task_status` handed to a child: marks it connected and releases the starter."""

    def __init__(
        self, health: ChildHealth, on_started: Callable[[], None], on_up: Callable[[], None]
    ) -> None:
        self._health = health
        self._on_started = on_started
        self._on_up = on_up
        self._done = False

    def started(self, value: None = None) -> None:
        if self._done:
            return
        self._done = True
        self._on_up()
        self._health.set(ChannelState.CONNECTED)
        self._on_started()


class ChildFn(Protocol):
    def __call__(
        self, health: ChildHealth, *, task_status: TaskStatus[None]
    ) -> Awaitable[None]: ...


class Supervisor:
    """Runs children with restarts; keeps every child's `ChildHealth` for the status report."""

    def __init__(
        self,
        backoff: Backoff,
        *,
        healthy_after_s: float,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._backoff = backoff
        self._healthy_after_s = healthy_after_s
        self._sleep = sleep
        self._monotonic = monotonic
        self.children: dict[str, ChildHealth] = {}

    def health(self, name: str) -> ChildHealth:
        if name not in self.children:
            self.children[name] = ChildHealth(name=name)
        return self.children[name]

    async def supervise(
        self,
        name: str,
        child: ChildFn,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run `child` until cancelled, restarting it on failure.

        `task_status.started()` is called once the child first reports that it is receiving,
        or when its first attempt ended in failure: the daemon's start-up never waits on a
        child that cannot connect yet (it shows up as reconnecting instead).
        """
        health = self.health(name)
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                task_status.started()

        failures = Failures(
            self._backoff, healthy_after_s=self._healthy_after_s, monotonic=self._monotonic
        )
        while True:
            status = _ChildStatus(health, release, failures.up)
            began = self._monotonic()
            reason: str
            try:
                with structlog.contextvars.bound_contextvars(child=name):
                    await child(health, task_status=status)
            except PermanentError as exc:
                health.set(ChannelState.FAILED, str(exc))
                log.error("child_failed_permanently", child=name, reason=str(exc))  # noqa: TRY400 - expected; the reason is enough
                release()
                await anyio.sleep_forever()
            except TransientError as exc:
                reason = str(exc) or type(exc).__name__
            except Exception as exc:  # a bug in a child must not take the daemon down quietly
                reason = f"{type(exc).__name__}: {exc}"
                log.exception("child_crashed", child=name)
            else:
                health.set(ChannelState.STOPPED, "the loop returned")
                log.warning("child_stopped", child=name)
                release()
                return
            release()
            delay = failures.next_delay()
            log.warning("child_failed", child=name, failures=failures.count, reason=reason)
            health.attempt = failures.count
            health.restarts += 1
            health.set(
                ChannelState.RECONNECTING,
                f"attempt {failures.count} failed: {reason}; retry in {delay:.1f}s",
            )
            log.info(
                "child_restart_scheduled",
                child=name,
                attempt=failures.count,
                retry_in_s=round(delay, 3),
                ran_s=round(self._monotonic() - began, 3),
            )
            await self._sleep(delay)
