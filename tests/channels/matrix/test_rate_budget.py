"""The account's rate budget on a simulated clock: Synapse's `rc_message` shape (a burst,
then a steady rate), who goes first when tokens are short, edits that give way, a 429 that
empties it, and a simulation against Synapse's own limiter arithmetic: whatever the timing of
the requests and of their answers, the server never has a reason to refuse one."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from nio import AsyncClient, ErrorResponse

from squidd.channels.matrix import MatrixChannel
from squidd.channels.matrix.rate import Priority, RateBudget, Unaffordable, bind, budget_for
from squidd.config.matrix import MatrixSettings
from tests.support.clock import FakeClock

pytestmark = pytest.mark.anyio


def budget(clock: FakeClock, rate: float = 0.2, burst: int = 10) -> RateBudget:
    return RateBudget(rate, burst, monotonic=clock.monotonic, sleep=clock.sleep)


async def settle_tasks() -> None:
    for _ in range(20):
        await anyio.lowlevel.checkpoint()


def test_a_burst_then_one_event_every_five_seconds() -> None:
    clock = FakeClock()
    rate = budget(clock)
    assert [rate.try_take(Priority.REPLY) for _ in range(11)] == [True] * 10 + [False]
    clock.advance(4.9)
    assert not rate.try_take(Priority.REPLY)
    clock.advance(0.1)
    assert rate.try_take(Priority.REPLY)
    assert not rate.try_take(Priority.REPLY)
    clock.advance(3_600)  # an idle hour fills it to the burst, not beyond
    assert rate.level() == 10


def test_edits_leave_tokens_for_replies_and_reactions() -> None:
    clock = FakeClock()
    rate = budget(clock)
    edits = 0
    while rate.try_take(Priority.EDIT):
        edits += 1
    assert edits == 10 - rate.edit_reserve == 7
    # What an answer's end costs is still there: the reply, the 👀's redaction, the ✅.
    assert [rate.try_take(Priority.REPLY) for _ in range(3)] == [True, True, True]
    assert not rate.try_take(Priority.REACTION)


async def test_an_edit_that_cannot_be_afforded_raises_rather_than_waits() -> None:
    clock = FakeClock()
    rate = budget(clock, burst=4)
    async with rate.spend(Priority.EDIT):
        pass
    with pytest.raises(Unaffordable):
        async with rate.spend(Priority.EDIT):
            raise AssertionError("not sent")
    assert rate.skipped == 1


async def test_waiters_are_served_replies_first_then_in_order() -> None:
    clock = FakeClock()
    rate = budget(clock, burst=1)
    assert rate.try_take(Priority.REPLY)
    served: list[str] = []

    async def wait(name: str, priority: Priority) -> None:
        await rate.take(priority)
        served.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait, "reaction 1", Priority.REACTION)
        await settle_tasks()
        tg.start_soon(wait, "reaction 2", Priority.REACTION)
        await settle_tasks()
        tg.start_soon(wait, "reply", Priority.REPLY)
        await settle_tasks()
        assert not rate.try_take(Priority.EDIT)  # an edit never jumps the queue
        for expected in (["reply"], ["reply", "reaction 1"], ["reply", "reaction 1", "reaction 2"]):
            clock.advance(4.99)
            await settle_tasks()
            assert served == expected[:-1]
            clock.advance(0.01)
            await settle_tasks()
            assert served == expected
    assert rate.waited == 3


async def test_a_429_empties_the_budget_until_its_retry_time() -> None:
    clock = FakeClock()
    rate = budget(clock)
    assert rate.try_take(Priority.REPLY)
    rate.limited(12.0)  # the server says: again in 12 s (nio sends the refused one then)
    taken: list[float] = []

    async def reply() -> None:
        await rate.take(Priority.REPLY)
        taken.append(clock.monotonic())

    async with anyio.create_task_group() as tg:
        tg.start_soon(reply)
        for _ in range(40):
            clock.advance(0.5)
            await settle_tasks()
    # 12 s for the refused request nio sends again, then 5 s for the next token.
    assert taken == [17.0]
    assert rate.refused == 1


async def test_a_cancelled_waiter_lets_the_next_one_through() -> None:
    clock = FakeClock()
    rate = budget(clock, burst=1)
    assert rate.try_take(Priority.REPLY)
    got: list[str] = []
    waiting = anyio.CancelScope()

    async def reply() -> None:
        with waiting:
            await rate.take(Priority.REPLY)
            got.append("reply")
        if waiting.cancel_called:
            got.append("reply cancelled")

    async def reaction() -> None:
        await rate.take(Priority.REACTION)
        got.append("reaction")

    async with anyio.create_task_group() as tg:
        tg.start_soon(reply)
        await settle_tasks()
        tg.start_soon(reaction)
        await settle_tasks()
        waiting.cancel()
        await settle_tasks()
        clock.advance(5)
        await settle_tasks()
    assert got == ["reply cancelled", "reaction"]


def test_off_when_the_rate_is_zero() -> None:
    clock = FakeClock()
    rate = budget(clock, rate=0, burst=1)
    assert all(rate.try_take(Priority.EDIT) for _ in range(100))
    rate.limited(30)
    assert rate.try_take(Priority.REPLY)


class SynapseLimiter:
    """Synapse's `Ratelimiter.can_do_action` for one key (synapse/api/ratelimiting.py)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.count, self.start = 0.0, 0.0

    def allow(self, now: float) -> bool:
        performed = self.count - (now - self.start) * self.rate
        if performed < 0:
            performed, self.count, self.start = 0, 0.0, now
        if performed > self.burst - 1:
            return False
        self.count += 1
        return True


requests = st.lists(
    st.tuples(
        st.one_of(st.just(0.0), st.floats(0, 2), st.floats(0, 30)),  # gap before it (s)
        st.sampled_from(list(Priority)),
        st.floats(0.001, 2.0),  # how long the request takes, answer included (s)
        st.floats(0, 1),  # where in that time the server counts it
    ),
    min_size=1,
    max_size=80,
)


class Sim:
    """Float time for the simulation (the budget reads it; nothing sleeps)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pending: list[tuple[float, float]] = []  # (answered at, sent at)

    def run_until(self, rate: RateBudget, when: float) -> None:
        """Move to `when`, settling each request answered on the way, in order."""
        for done, sent in sorted(p for p in self.pending if p[0] <= when):
            self.now = max(self.now, done)
            rate.settle(sent)
            self.pending.remove((done, sent))
        self.now = max(self.now, when)


# The first request is counted late, when the bucket was full (the server forgives nothing
# of it before it counts it): the rest of the burst at once, then one more.
SLOW_FIRST = [
    (0.0, Priority.REPLY, 2.0, 1.0),
    *[(0.5 if i == 0 else 0.0, Priority.REPLY, 0.001, 0.0) for i in range(9)],
    (0.0, Priority.REPLY, 0.001, 1.0),
]


@settings(max_examples=300, deadline=None)
@given(requests)
@example(SLOW_FIRST)
def test_the_server_never_has_a_reason_to_refuse(
    wanted: list[tuple[float, Priority, float, float]],
) -> None:
    """Requests are sent when the budget lets them (an edit when it can be afforded at once,
    others at the first moment they may), several in flight at once; the server counts each
    somewhere between its sending and its answer."""
    sim = Sim()
    rate = RateBudget(0.2, 10, monotonic=lambda: sim.now)
    counted: list[float] = []
    for gap, priority, flight, where in wanted:
        sim.run_until(rate, sim.now + gap)
        if priority is not Priority.EDIT:
            while not rate.affordable(priority):  # as `take` would: wait for the token
                sim.run_until(rate, sim.now + max((1 - rate.level()) / rate.rate, 1e-6))
        if not rate.try_take(priority):
            continue  # an edit skipped
        sim.pending.append((sim.now + flight, sim.now))
        counted.append(sim.now + where * flight)
    server = SynapseLimiter(0.2, 10)
    assert all(server.allow(at) for at in sorted(counted))
    assert len(counted) >= sum(1 for w in wanted if w[1] is not Priority.EDIT)


async def test_a_429_seen_by_the_client_feeds_its_budget() -> None:
    clock = FakeClock()
    rate = budget(clock)
    client = AsyncClient("http://127.0.0.1:1", "@bot:example.org")
    try:
        bind(client, rate)
        assert budget_for(client) is rate
        refused = ErrorResponse("Too Many Requests", "M_LIMIT_EXCEEDED", retry_after_ms=3_000)
        await client.run_response_callbacks([ErrorResponse("no", "M_FORBIDDEN"), refused])
        assert rate.refused == 1
        assert rate.level() == pytest.approx(-0.6)  # 3 s of refill owed to nio's resend
        assert not rate.try_take(Priority.REPLY)
        clock.advance(8)
        assert rate.try_take(Priority.REPLY)
    finally:
        await client.close()


async def test_the_budget_outlives_a_reconnect(tmp_path: Path) -> None:
    """The channel keeps one budget (its carried state) and binds each new client to it:
    what was spent before the reconnect still counts."""
    settings = MatrixSettings(rate_per_second=0.5, rate_burst=4)
    channel = MatrixChannel(settings, tmp_path)
    kept = channel._carried.budget
    assert (kept.rate, kept.burst) == (0.5, 4)
    first = AsyncClient("http://127.0.0.1:1", "@bot:example.org")
    second = AsyncClient("http://127.0.0.1:1", "@bot:example.org")
    try:
        bind(first, kept)
        assert all(budget_for(first).try_take(Priority.REPLY) for _ in range(4))
        bind(second, kept)  # the next connection's client
        assert not budget_for(second).try_take(Priority.REPLY)
    finally:
        await first.close()
        await second.close()
