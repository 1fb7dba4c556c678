"""The router with plain doubles for the turn and the records: ordering, the concurrency
cap, intake stopping at shutdown, suppressed and undeliverable replies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
import structlog
from structlog.testing import capture_logs

from squidd.core.backoff import Backoff
from squidd.core.models import Destination, Inbound, Outbound, PendingReply, SessionId
from squidd.core.reply_files import FileRef, Reply
from squidd.core.router import Router
from squidd.core.settlement import CRASH_APOLOGY
from squidd.errors import DeliveryError, DeliveryRefusedError
from tests.support.router import Collect, Records, build_router

pytestmark = pytest.mark.anyio


def make_router(
    turn: Callable[[Inbound], object], cap: int = 4, channel: Any = None
) -> tuple[Router, Any, Records]:
    records = Records()
    channel = channel or Collect()
    router = build_router(turn, {"c": channel}, records=records, max_concurrent_turns=cap)  # type: ignore[arg-type]
    return router, channel, records


async def answer_first(router: Router, *, quiet_reply: str | None = None) -> list[str]:
    """Run `router` until message 1 of session `a` is acknowledged, then stop it; the ids
    acknowledged."""
    acked: list[str] = []
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(inbound(1, "a", acked, quiet_reply=quiet_reply))
        with anyio.fail_after(10):  # a guard against hanging, not a timing assertion
            while not acked:  # noqa: ASYNC110 - polls state that has no event
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    return acked


def inbound(
    n: int,
    session: str,
    acked: list[str] | None = None,
    *,
    quiet_reply: str | None = None,
    reply_to: Destination | None = None,
) -> Inbound:
    async def ack() -> None:
        if acked is not None:
            acked.append(f"m{n}")

    return Inbound(
        "c",
        f"m{n}",
        SessionId(session),
        "u",
        f"text {n}",
        quiet_reply=quiet_reply,
        reply_to=reply_to,
        ack=ack,
    )


async def test_cap_and_order() -> None:
    running = 0
    peak = 0
    order: dict[str, list[str]] = {}

    async def turn(message: Inbound) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01)
        order.setdefault(message.session_id, []).append(message.source_id)
        running -= 1
        return "ok"

    router, channel, _ = make_router(turn, cap=3)
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        for n in range(40):
            await router.submit(inbound(n, f"s{n % 8}"))
        while len(channel.sent) < 40:  # noqa: ASYNC110 - polls state that has no event
            await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert peak == 3
    for s in range(8):
        assert order[f"s{s}"] == [f"m{n}" for n in range(s, 40, 8)]


async def test_stop_intake_finishes_the_turn_in_flight_and_leaves_the_rest() -> None:
    release = anyio.Event()

    async def turn(message: Inbound) -> str:
        await release.wait()
        return "done"

    router, channel, records = make_router(turn, cap=1)
    acked: list[str] = []
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(inbound(1, "a", acked))
        await router.submit(inbound(2, "a", acked))
        await router.submit(inbound(3, "b", acked))
        await anyio.sleep(0.01)
        router.stop_intake()
        release.set()
        with anyio.fail_after(5):
            await router.wait_idle()
        with anyio.move_on_after(0.05) as blocked:
            await router.submit(inbound(4, "c", acked))
        assert blocked.cancelled_caught  # no intake once stopping
        tg.cancel_scope.cancel()
    assert acked == ["m1"]
    assert [o.text for o in channel.sent] == ["done"]
    assert records.handled == {("c", "m1")}


async def test_quiet_and_undeliverable_replies() -> None:
    async def turn(message: Inbound) -> str:
        return "HEARTBEAT_OK" if message.source_id == "m1" else "something"

    router, channel, records = make_router(turn)
    acked: list[str] = []
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            await tg.start(router.run)
            await router.submit(inbound(1, "a", acked, quiet_reply="HEARTBEAT_OK"))
            await router.submit(inbound(2, "b", acked, reply_to=Destination("matrix", "!r:x")))
            while len(acked) < 2:  # noqa: ASYNC110 - polls state that has no event
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert channel.sent == []
    assert records.handled == {("c", "m1"), ("c", "m2")}
    assert [e["event"] for e in logs if e["event"].startswith("reply_")] == [
        "reply_suppressed",
        "reply_not_delivered",
    ]


async def test_the_files_of_a_reply_are_kept_in_the_outbox_and_delivered() -> None:
    ref = FileRef("/w/a.pdf", "file", "application/pdf", 5, "11" * 32, "a.pdf")
    kept: list[PendingReply | None] = []

    class Peek(Collect):
        async def send(self, outbound: Outbound) -> None:
            kept.append(await records.get("c", "m1"))
            await super().send(outbound)

    async def turn(message: Inbound) -> Reply:
        return Reply("HEARTBEAT_OK", (ref,))

    router, channel, records = make_router(turn, channel=Peek())
    # A quiet reply that carries a file is not quiet: the file goes out.
    await answer_first(router, quiet_reply="HEARTBEAT_OK")
    assert [o.files for o in channel.sent] == [(ref,)]
    assert kept[0] is not None and kept[0].files == (ref,)
    assert records.entries == {}


async def test_a_reply_resumed_from_the_outbox_keeps_its_files() -> None:
    ref = FileRef("/w/a.pdf", "file", "application/pdf", 5, "11" * 32, "a.pdf")

    async def turn(message: Inbound) -> str:
        raise AssertionError("a kept reply must not run the model again")

    router, channel, records = make_router(turn)
    records.entries[("c", "m1")] = PendingReply("c", "u", "kept", SessionId("a"), files=(ref,))
    await answer_first(router)
    assert [(o.text, o.files) for o in channel.sent] == [("kept", (ref,))]


def test_destination_parse() -> None:
    assert Destination.parse("matrix:!room:example.org") == Destination(
        "matrix", "!room:example.org"
    )
    assert Destination.parse("email:me@example.org") == Destination("email", "me@example.org")
    assert Destination.parse("") is None
    assert Destination.parse("terminal") is None


class Refusing:
    """A channel whose sends fail (its server is down) until `accept` is set."""

    name = "down"

    def __init__(self) -> None:
        self.attempts = 0

    async def run(self, inbox: object, *, task_status: object) -> None:
        raise NotImplementedError

    async def send(self, outbound: Outbound) -> None:
        self.attempts += 1
        raise DeliveryError("server unreachable")


async def test_a_failing_delivery_does_not_hold_a_turn_slot() -> None:
    """With one turn at a time, a reply stuck in delivery retries on one channel must not
    keep the other channels' messages from being answered."""
    records = Records()
    down, up = Refusing(), Collect()
    retrying = anyio.Event()
    never = anyio.Event()

    async def stuck_retry(delay: float) -> None:
        retrying.set()
        await never.wait()

    async def turn(message: Inbound) -> str:
        return f"re: {message.text}"

    router = build_router(
        turn,
        {"down": down, "c": up},
        records=records,
        max_concurrent_turns=1,
        backoff=Backoff(1.0, 1.0),
        sleep=stuck_retry,
    )
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(Inbound("down", "d1", SessionId("x"), "u", "first"))
        with anyio.fail_after(5):
            await retrying.wait()
        await router.submit(inbound(2, "y"))
        with anyio.fail_after(5):  # a guard against hanging, not a timing assertion
            while not up.sent:  # noqa: ASYNC110 - polls state that has no event
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert [o.text for o in up.sent] == ["re: text 2"]
    assert down.attempts == 1
    assert ("down", "d1") not in records.handled


async def test_redelivery_after_a_crash_before_the_outbox_cleanup_drops_the_entry() -> None:
    """The daemon died after recording the message as handled but before removing its
    outbox entry: the redelivery is acknowledged, not answered, and the entry goes away
    (else `squidd status` shows a reply waiting for delivery forever)."""

    async def turn(message: Inbound) -> str:
        raise AssertionError("a handled message must not run the model again")

    router, channel, records = make_router(turn)
    records.handled.add(("c", "m1"))
    records.entries[("c", "m1")] = PendingReply("c", "u", "sent before", SessionId("a"))
    await answer_first(router)
    assert channel.sent == []
    assert records.entries == {}


async def test_a_crashed_turn_gets_an_honest_apology_and_is_acknowledged() -> None:
    """A bug (not the model being down) is answered with its own short apology."""

    async def turn(message: Inbound) -> str:
        raise KeyError("bug")

    router, channel, records = make_router(turn)
    with capture_logs() as logs:
        await answer_first(router)
    assert [o.text for o in channel.sent] == [CRASH_APOLOGY]
    assert "language model" not in CRASH_APOLOGY
    assert records.handled == {("c", "m1")}
    assert any(e["event"] == "turn_crashed" for e in logs)


async def test_each_turn_logs_its_own_context_not_the_submitters() -> None:
    """A channel binds its own fields (the email uid) around `submit`; the session worker
    started by the first message must not carry them into later messages' turns."""

    async def turn(message: Inbound) -> str:
        structlog.get_logger().info("turn_step")
        return "ok"

    router, channel, _ = make_router(turn)
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        async with anyio.create_task_group() as tg:
            await tg.start(router.run)
            for n in (1, 2, 3):
                with structlog.contextvars.bound_contextvars(uid=n):
                    await router.submit(inbound(n, "same-session"))
            with anyio.fail_after(5):
                while len(channel.sent) < 3:  # noqa: ASYNC110 - polls state that has no event
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    steps = [e for e in logs if e["event"] == "turn_step"]
    assert [e["message_id"] for e in steps] == ["m1", "m2", "m3"]
    assert all("uid" not in e for e in steps), steps


class RefusingFor:
    """A channel that refuses replies to `bad` for good and delivers the rest."""

    name = "c"

    def __init__(self, bad: str) -> None:
        self.bad = bad
        self.attempts: list[str] = []
        self.sent: list[Outbound] = []

    async def run(self, inbox: object, *, task_status: object) -> None:
        raise NotImplementedError

    async def send(self, outbound: Outbound) -> None:
        self.attempts.append(outbound.target)
        if outbound.target == self.bad:
            raise DeliveryRefusedError("550 5.1.1 no such user")
        self.sent.append(outbound)


async def test_a_permanent_refusal_ends_the_delivery_and_frees_the_session() -> None:
    """One attempt, an error logged once, no outbox entry left, recorded as failed, the
    source told through `on_undeliverable` (not `ack`), and the session's next message is
    answered; the router is idle at once, so a shutdown does not wait for it."""
    records = Records()
    channel = RefusingFor("nobody@x")
    sleeps: list[float] = []

    async def no_sleep(delay: float) -> None:
        sleeps.append(delay)

    async def turn(message: Inbound) -> str:
        return f"re: {message.text}"

    router = build_router(
        turn, {"c": channel}, records=records, max_concurrent_turns=1, sleep=no_sleep
    )
    acked: list[str] = []
    failed: list[tuple[str, str]] = []

    def message(n: int, sender: str) -> Inbound:
        async def ack() -> None:
            acked.append(f"m{n}")

        async def give_up(reason: str) -> None:
            failed.append((f"m{n}", reason))

        return Inbound(
            "c", f"m{n}", SessionId("s"), sender, f"text {n}", ack=ack, on_undeliverable=give_up
        )

    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            await tg.start(router.run)
            await router.submit(message(1, "nobody@x"))
            await router.submit(message(2, "someone@x"))
            with anyio.fail_after(5):  # a guard against hanging, not a timing assertion
                while len(acked) < 1:  # noqa: ASYNC110 - polls state that has no event
                    await anyio.sleep(0.01)
                await router.wait_idle()
            tg.cancel_scope.cancel()
    assert channel.attempts == ["nobody@x", "someone@x"]
    assert sleeps == []
    assert [o.text for o in channel.sent] == ["re: text 2"]
    assert failed == [("m1", "550 5.1.1 no such user")]
    assert acked == ["m2"]
    assert records.entries == {}
    assert records.handled == {("c", "m1"), ("c", "m2")}
    assert records.failed_ids == {("c", "m1")}
    rejected = [e for e in logs if e["event"] == "reply_rejected"]
    assert len(rejected) == 1 and rejected[0]["log_level"] == "error"

    # A redelivery (after a crash, or a rescan) is told "failed" again: never acknowledged
    # as answered, never answered.
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(message(1, "nobody@x"))
        with anyio.fail_after(5):
            while len(failed) < 2:  # noqa: ASYNC110 - polls state that has no event
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert channel.attempts == ["nobody@x", "someone@x"]
    assert acked == ["m2"]


async def test_a_refusal_without_a_failure_hook_acknowledges() -> None:
    """A channel with no notion of "failed" (cron runs, Matrix) gets `ack`: the message is
    done, else its source would hand it over again forever."""

    async def turn(message: Inbound) -> str:
        return "x"

    router, _, records = make_router(turn, channel=RefusingFor("u"))
    assert await answer_first(router) == ["m1"]
    assert records.failed_ids == {("c", "m1")}
