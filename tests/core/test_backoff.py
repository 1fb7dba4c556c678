"""The one retry schedule: doubling up to a cap with bounded jitter, and a failure count
that starts over once a loop stayed healthy."""

from __future__ import annotations

import pytest

from squidd.core.backoff import Backoff, Failures, reconnecting
from squidd.errors import PermanentError, TransientError

pytestmark = pytest.mark.anyio


def test_backoff_doubles_up_to_the_cap_with_bounded_jitter() -> None:
    top = Backoff(1.0, 8.0, jitter=lambda: 1.0)
    bottom = Backoff(1.0, 8.0, jitter=lambda: 0.0)
    assert [top.delay(n) for n in range(1, 7)] == [1, 2, 4, 8, 8, 8]
    assert [bottom.delay(n) for n in range(1, 5)] == [0.5, 1, 2, 4]


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_failures_grow_while_flapping_and_reset_after_a_healthy_period() -> None:
    clock = Clock()
    failures = Failures(Backoff(1.0, 60.0, jitter=lambda: 1.0), healthy_after_s=30, monotonic=clock)
    assert [failures.next_delay() for _ in range(3)] == [1, 2, 4]
    failures.up()
    clock.t += 5  # up, but only briefly: still the same run of failures
    assert failures.next_delay() == 8
    failures.up()
    clock.t += 31
    assert failures.next_delay() == 1
    assert failures.count == 1


def test_without_a_healthy_period_one_success_resets() -> None:
    failures = Failures(Backoff(1.0, 60.0, jitter=lambda: 1.0))
    failures.next_delay()
    failures.next_delay()
    assert failures.count == 2
    failures.up()
    assert failures.count == 0
    assert failures.next_delay() == 1


async def test_reconnecting_retries_transient_failures_and_reports_recovery() -> None:
    outcomes: list[Exception | None] = [
        TransientError("down"),
        TransientError("still down"),
        None,
        None,
        PermanentError("login refused"),
    ]
    retries: list[tuple[str, float]] = []
    recovered: list[int] = []

    async def attempt() -> None:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    failures = Failures(Backoff(0.001, 0.002, jitter=lambda: 0.0))
    with pytest.raises(PermanentError):
        await reconnecting(
            attempt,
            failures,
            on_retry=lambda exc, delay: retries.append((str(exc), delay)),
            on_recovered=recovered.append,
        )
    assert retries == [("down", 0.0005), ("still down", 0.001)]
    assert recovered == [2]  # once, after the two failures; not after the next success
    assert failures.count == 0
    assert outcomes == []


async def test_on_retry_may_stop_the_loop() -> None:
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        raise TransientError("no route")

    def give_up(exc: TransientError, delay: float) -> None:
        raise exc

    with pytest.raises(TransientError):
        await reconnecting(attempt, Failures(Backoff(1, 2)), on_retry=give_up)
    assert calls == 1
