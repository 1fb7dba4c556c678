"""The one retry schedule: doubling up to a cap with bounded jitter, and a failure count
that starts over once a loop stayed healthy."""

from __future__ import annotations

from squidd.core.backoff import Backoff, Failures


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
    failures = Failures(Backoff(1.0, 60.0, jitter=lambda: 1.0), healthy_after_s=30, clock=clock)
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
