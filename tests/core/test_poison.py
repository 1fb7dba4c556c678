"""Poison parking: which failures are retried unbounded, and what the router does with a
message that keeps failing the same way (parked after `max_attempts`, counted before each
attempt, its session goes on, a shutdown does not wait for it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from structlog.testing import capture_logs

from squidd.core.models import Inbound, Outbound, SessionId
from squidd.core.poison import (
    PoisonGuard,
    describe,
    is_passing,
    parked_id,
)
from squidd.core.router import Router
from squidd.core.supervisor import ChildHealth
from squidd.errors import (
    DeliveryError,
    LLMUnavailableError,
    StorageError,
    TransientError,
)
from tests.support.doubles import MemoryAttempts, MemoryDeadLetters
from tests.support.router import Records, build_router

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "exc",
    [
        TransientError("x"),
        DeliveryError("smtp 451"),
        LLMUnavailableError("down"),
        ConnectionResetError("reset"),
        TimeoutError(),
    ],
)
def test_known_passing_failures(exc: BaseException) -> None:
    assert is_passing(exc)


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("bad"),
        UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed"),
        KeyError("k"),
        TypeError("t"),
        StorageError("cannot read x: not a pending reply"),
        RuntimeError("bug"),
    ],
)
def test_defects_are_not_passing(exc: BaseException) -> None:
    assert not is_passing(exc)


def test_describe_names_the_type_and_cuts_the_message() -> None:
    assert describe(ValueError("a\nb")) == "ValueError: a b"
    assert describe(KeyError()) == "KeyError"
    assert len(describe(ValueError("x" * 5000))) == 500


def test_parked_id_is_stable_and_distinct() -> None:
    assert parked_id("email", "<a@b>") == parked_id("email", "<a@b>")
    assert parked_id("email", "<a@b>") != parked_id("matrix", "<a@b>")


class Flaky:
    """A channel whose send fails for the texts `failing` names, with `error()`."""

    name = "c"

    def __init__(self, failing: set[str], error: Callable[[], Exception]) -> None:
        self.failing = failing
        self.error = error
        self.tries: list[str] = []
        self.sent: list[Outbound] = []

    async def run(self, inbox: object, *, task_status: object) -> None:
        raise NotImplementedError

    async def send(self, outbound: Outbound) -> None:
        self.tries.append(outbound.text)
        if outbound.text in self.failing:
            raise self.error()
        self.sent.append(outbound)


def router_with(
    channel: Flaky,
    attempts: MemoryAttempts,
    dead: MemoryDeadLetters,
    *,
    max_attempts: int = 3,
    sleep: Callable[[float], Any] | None = None,
) -> tuple[Router, Records]:
    records = Records()

    async def turn(message: Inbound) -> str:
        return f"re: {message.text}"

    async def no_sleep(delay: float) -> None:
        await anyio.lowlevel.checkpoint()

    router = build_router(
        turn,
        {"c": channel},
        records=records,
        poison=PoisonGuard(attempts, dead, max_attempts=max_attempts),
        sleep=sleep or no_sleep,
    )
    return router, records


def message(n: int, told: list[str], acked: list[str]) -> Inbound:
    async def ack() -> None:
        acked.append(f"m{n}")

    async def undeliverable(reason: str) -> None:
        told.append(f"m{n}: {reason}")

    return Inbound(
        "c",
        f"m{n}",
        SessionId("s"),
        "u",
        f"text {n}",
        ack=ack,
        on_undeliverable=undeliverable,
    )


async def until(check: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not check():  # noqa: ASYNC110 - polls state that has no event
            await anyio.sleep(0.005)


async def test_a_send_defect_is_parked_after_the_attempts_and_the_session_goes_on() -> None:
    channel = Flaky({"re: text 1"}, lambda: ValueError("surrogates not allowed"))
    attempts, dead = MemoryAttempts(), MemoryDeadLetters()
    router, records = router_with(channel, attempts, dead)
    told: list[str] = []
    acked: list[str] = []
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            await tg.start(router.run)
            await router.submit(message(1, told, acked))
            await router.submit(message(2, told, acked))
            await until(lambda: [o.text for o in channel.sent] == ["re: text 2"])
            tg.cancel_scope.cancel()
    assert channel.tries == ["re: text 1"] * 3 + ["re: text 2"]
    assert acked == ["m2"]
    assert len(told) == 1 and told[0].startswith("m1: parked after 3 failed attempts")
    assert await records.contains("c", "m1") and await records.failed("c", "m1")
    assert not records.entries  # the reply moved out of the outbox, into the dead letters
    assert attempts.counts == {}
    (item,) = dead.items.values()
    assert item.id == parked_id("c", "m1")
    assert (item.loop, item.error, item.attempts) == ("message", "ValueError", 3)
    assert item.reason == "ValueError: surrogates not allowed"
    assert item.reply is not None and item.reply.text == "re: text 1"
    assert item.inbound is not None and item.inbound.text == "text 1"
    parked = [e for e in logs if e["event"] == "parked"]
    assert len(parked) == 1 and parked[0]["log_level"] == "error"
    assert parked[0]["error"] == "ValueError" and "surrogates" not in str(parked[0])


async def test_a_passing_failure_is_retried_past_the_attempts_and_not_parked() -> None:
    failures = 0

    def error() -> Exception:
        nonlocal failures
        failures += 1
        if failures >= 6:
            channel.failing.clear()
        return DeliveryError("451 try later")

    channel = Flaky({"re: text 1"}, error)
    attempts, dead = MemoryAttempts(), MemoryDeadLetters()
    router, _ = router_with(channel, attempts, dead)
    told: list[str] = []
    acked: list[str] = []
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(message(1, told, acked))
        await until(lambda: acked == ["m1"])
        tg.cancel_scope.cancel()
    assert len(channel.tries) == 7 and [o.text for o in channel.sent] == ["re: text 1"]
    assert dead.items == {} and told == [] and attempts.counts == {}


async def test_the_count_is_kept_before_the_attempt_so_a_crashing_message_is_parked() -> None:
    """Three earlier attempts never ended (the daemon died in each): no fourth is made."""
    channel = Flaky(set(), ValueError)
    attempts, dead = MemoryAttempts(), MemoryDeadLetters()
    attempts.counts["c\0m1"] = (3, "")
    router, records = router_with(channel, attempts, dead)
    told: list[str] = []
    acked: list[str] = []
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(message(1, told, acked))
        await router.submit(message(2, told, acked))
        await until(lambda: acked == ["m2"])
        tg.cancel_scope.cancel()
    assert channel.tries == ["re: text 2"]
    (item,) = dead.items.values()
    assert item.error == "Interrupted" and "daemon stopped during each of 3" in item.reason
    assert await records.failed("c", "m1")


async def test_each_attempt_is_counted_before_it_runs() -> None:
    """What a restart would find: the count written before the send that then failed."""
    seen: list[tuple[int, str]] = []
    attempts, dead = MemoryAttempts(), MemoryDeadLetters()

    class Recording(Flaky):
        async def send(self, outbound: Outbound) -> None:
            seen.append(await attempts.get("c\0m1"))
            await super().send(outbound)

    channel = Recording({"re: text 1"}, lambda: KeyError("x"))
    router, _ = router_with(channel, attempts, dead)
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(message(1, [], []))
        await until(lambda: bool(dead.items))
        tg.cancel_scope.cancel()
    assert [count for count, _ in seen] == [1, 2, 3]
    assert seen[1][1] == "KeyError: 'x'"


async def test_a_shutdown_does_not_wait_for_a_message_between_attempts() -> None:
    channel = Flaky({"re: text 1"}, lambda: ValueError("bad"))
    attempts, dead = MemoryAttempts(), MemoryDeadLetters()
    waiting = anyio.Event()

    async def long_sleep(delay: float) -> None:
        waiting.set()
        await anyio.sleep_forever()

    router, _ = router_with(channel, attempts, dead, sleep=long_sleep)
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(message(1, [], []))
        await waiting.wait()
        router.stop_intake()
        with anyio.fail_after(5):
            await router.wait_idle()
        tg.cancel_scope.cancel()
    # One attempt made and counted; the one that would come after the wait was not.
    assert attempts.counts["c\0m1"] == (1, "ValueError: bad")
    assert dead.items == {}


async def test_a_shutdown_during_an_attempt_does_not_count_it() -> None:
    started = anyio.Event()
    attempts, dead = MemoryAttempts(), MemoryDeadLetters()
    records = Records()

    async def turn(message: Inbound) -> str:
        started.set()
        await anyio.sleep_forever()
        return ""

    router = build_router(
        turn,
        {"c": Flaky(set(), ValueError)},
        records=records,
        poison=PoisonGuard(attempts, dead),
        max_concurrent_turns=1,
        health_of=ChildHealth,
    )
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(message(1, [], []))
        await started.wait()
        assert attempts.counts["c\0m1"] == (1, "")
        tg.cancel_scope.cancel()
    assert attempts.counts == {}
