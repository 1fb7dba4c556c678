"""The supervisor: restarts with capped backoff, reset after a healthy period, permanent
failures parked with their reason, crashes (bugs) restarted and logged."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import TaskStatus
from structlog.testing import capture_logs

from squidd.core.backoff import Backoff
from squidd.core.ports import ChannelState
from squidd.core.supervisor import ChildHealth, Supervisor
from squidd.errors import PermanentError, TransientError

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds
        await anyio.lowlevel.checkpoint()


async def test_delay_resets_after_a_healthy_period() -> None:
    clock = Clock()
    sup = Supervisor(
        Backoff(1.0, 100.0, jitter=lambda: 1.0),
        healthy_after_s=60,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    # fails 3 times at once, then runs 120 s healthy and fails, then fails once more
    script = ["fail", "fail", "fail", "healthy", "fail", "park"]

    async def child(health: ChildHealth, *, task_status: TaskStatus[None]) -> None:
        step = script.pop(0)
        if step == "park":
            raise PermanentError("stop here")
        task_status.started()
        if step == "healthy":
            clock.t += 120
        raise TransientError(step)

    async with anyio.create_task_group() as tg:
        await tg.start(sup.supervise, "c", child)
        while sup.children["c"].state != ChannelState.FAILED:
            await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    assert clock.sleeps == [1, 2, 4, 1, 2]
    assert sup.children["c"].detail == "stop here"
    assert sup.children["c"].restarts == 5


async def test_a_crashing_child_is_logged_and_restarted() -> None:
    clock = Clock()
    sup = Supervisor(Backoff(0.01, 0.01), healthy_after_s=60, sleep=clock.sleep)
    runs = 0

    async def child(health: ChildHealth, *, task_status: TaskStatus[None]) -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise KeyError("a bug")
        task_status.started()
        await anyio.sleep_forever()

    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            await tg.start(sup.supervise, "buggy", child)
            while sup.children["buggy"].state != ChannelState.CONNECTED:
                await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
    assert runs == 2
    crash = next(e for e in logs if e["event"] == "child_crashed")
    assert crash["child"] == "buggy" and crash["log_level"] == "error"


async def test_start_is_released_when_the_first_attempt_fails() -> None:
    """Start-up (and READY=1) never waits for a child that cannot connect yet."""
    sup = Supervisor(Backoff(10, 10), healthy_after_s=60)

    async def child(health: ChildHealth, *, task_status: TaskStatus[None]) -> None:
        raise TransientError("server down")

    async with anyio.create_task_group() as tg:
        await tg.start(sup.supervise, "down", child)
        health = sup.children["down"]
        assert health.state == ChannelState.RECONNECTING
        assert "server down" in health.detail
        tg.cancel_scope.cancel()
