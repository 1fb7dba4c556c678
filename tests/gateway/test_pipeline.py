"""The pipeline before the session queue: its stages in order (answers to an open question
and `/stop` before anything that holds a message; the channel's own stages; bursts last,
only where the channel declares a quiet window), each stage on its own, and through the
running daemon on a channel with Matrix's default quiet window: a plain "yes" (or "no")
to an approval prompt reaches the waiting question while the turn that asked still runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from squidd.core.models import Inbound, InboundKind
from squidd.core.ports import HandOn, Later, Stage
from squidd.gateway.approval_answers import ApprovalAnswers
from squidd.gateway.build import stages_for
from squidd.gateway.bursts import Bursts
from squidd.gateway.conversations import StopEarly
from squidd.gateway.pipeline import Pipeline
from squidd.gateway.runtime import build_runtime
from squidd.gateway.turn_runner import TurnRunner
from tests.gateway.test_bursts import MatrixLike
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import (
    RAN_COMMAND,
    make_settings,
    question_id,
    running_daemon,
    shell_approval_settings,
)
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

OWNER = "alice"


class Marker:
    """A channel's own stage: notes each message it sees."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def take(self, message: Inbound, then: HandOn, later: Later) -> None:
        self.seen.append(message.text)
        await then(message)


class WithStages(MatrixLike):
    def __init__(self, quiet_s: float | None) -> None:
        super().__init__(quiet_s)
        self.marker = Marker()

    def stages(self) -> Sequence[Stage]:
        return (self.marker,)


def _conversations(tmp_path: Path, llm_url: str) -> TurnRunner:
    settings = make_settings(tmp_path / "data", llm_url, tools={"shell": {"enabled": True}})
    runtime = build_runtime(settings)
    return TurnRunner(runtime, None, None, {})  # type: ignore[arg-type]  # only its conversations


def test_answers_and_stop_come_before_the_channel_stages_and_bursts(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    conversations = _conversations(tmp_path, fake_llm.base_url).conversations
    answers = ApprovalAnswers(None, {}, None)  # type: ignore[arg-type]  # only its place is looked at
    channel = WithStages(quiet_s=1.5)
    stages = stages_for(channel, answers, conversations)
    assert [type(s) for s in stages] == [ApprovalAnswers, StopEarly, Marker, Bursts]
    assert stages[0] is answers and stages[2] is channel.marker
    # No quiet window (email, `debounce_ms = 0`): nothing holds; no approvals: none taken.
    plain = stages_for(MemoryChannel("email"), None, conversations)
    assert [type(s) for s in plain] == [StopEarly]


def _message(text: str, source_id: str, session: str = "!room") -> Inbound:
    async def ack() -> None:
        return None

    return Inbound(
        channel="matrix",
        source_id=source_id,
        session_id=session,
        sender=OWNER,
        text=text,
        kind=InboundKind.MESSAGE,
        ack=ack,
    )


class Collect:
    """The router's place: what comes out of the pipeline."""

    def __init__(self) -> None:
        self.put_texts: list[str] = []
        self.changed = anyio.Event()

    async def put(self, message: Inbound) -> None:
        self.put_texts.append(message.text)
        self.changed.set()
        self.changed = anyio.Event()

    def report(self, state: object, detail: str = "") -> None:
        pass

    @property
    def poison(self) -> object:
        raise AssertionError("not used")


class NoTurns:
    def running(self, conversation: str) -> bool:
        return False

    async def idle(self, conversation: str) -> None:
        return None


async def _until(out: Collect, count: int) -> None:
    with anyio.fail_after(30):
        while len(out.put_texts) < count:
            await out.changed.wait()


async def test_slash_shaped_text_that_is_no_command_is_merged_into_the_burst() -> None:
    out = Collect()
    pipeline = Pipeline([Bursts(quiet_s=0.2, running=NoTurns())], out)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        await pipeline.put(_message("the disk", "m1"))
        await pipeline.put(_message("/usr is full", "m2"))
        await pipeline.put(_message("/help", "m3"))  # a command: what waits goes first
        await _until(out, 2)
        tg.cancel_scope.cancel()
    assert out.put_texts == ["the disk\n\n/usr is full", "/help"]


async def test_a_held_burst_is_handed_on_by_the_pipeline_not_by_one_connection() -> None:
    # A channel's receive loop that ends (a restart) after handing messages on: what the
    # burst holds still comes out, since the pipeline's task group outlives the loop.
    out = Collect()
    pipeline = Pipeline([Bursts(quiet_s=0.2, running=NoTurns())], out)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        async with anyio.create_task_group() as connection:
            connection.start_soon(pipeline.put, _message("one", "m1"))
            connection.start_soon(pipeline.put, _message("two", "m2"))
        await _until(out, 1)
        tg.cancel_scope.cancel()
    assert sorted(out.put_texts[0].split("\n\n")) == ["one", "two"]


@pytest.mark.parametrize(("answer", "runs", "reply"), [("yes", 1, "done"), ("no", 0, "denied")])
async def test_a_plain_answer_reaches_the_question_past_the_quiet_window(
    tmp_path: Path, fake_llm: FakeLLM, answer: str, runs: int, reply: str
) -> None:
    settings, marker = shell_approval_settings(
        tmp_path, fake_llm.base_url, approvers=[OWNER], timeout_s=60
    )
    fake_llm.push(Reply(tool_calls=[("shell", {"command": RAN_COMMAND})]), reply)
    channel = MatrixLike()  # Matrix's default quiet window, 1.5 s
    async with running_daemon(settings, [channel]):  # type: ignore[arg-type]
        channel.inject("run it", session="!room", sender=OWNER, source_id="m1")
        await channel.wait_for(1)
        question_id(channel.sent[0].text)
        channel.inject(answer, session="!room", sender=OWNER, source_id="m2")
        await channel.wait_for(2)
        await channel.wait_for(2, what="acked")
    assert channel.sent[1].text == reply
    assert (len(marker.read_text().splitlines()) if marker.exists() else 0) == runs
    assert len(fake_llm.chat_requests) == 2
    tool_result = fake_llm.chat_requests[1]["messages"][-1]
    assert tool_result["role"] == "tool"
    assert ("denied" in str(tool_result["content"]).lower()) is (answer == "no")


async def test_a_message_whose_answer_had_begun_is_never_merged_into_a_burst() -> None:
    # After a restart the old message comes again (its answer was streaming when the
    # daemon stopped) and a new one right after it: merged, the old one would be answered
    # anew; alone, its answer is finished and the new one gets its own.
    out = Collect()
    begun_ids = {"m-old"}

    async def begun(message: Inbound) -> bool:
        return message.source_id in begun_ids

    bursts = Bursts(quiet_s=0.2, running=NoTurns(), begun=begun)  # type: ignore[arg-type]
    pipeline = Pipeline([bursts], out)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        await pipeline.put(_message("what did I ask?", "m-old"))
        await pipeline.put(_message("and one more thing", "m-new"))
        await pipeline.put(_message("thanks", "m-newer"))
        await _until(out, 2)
        tg.cancel_scope.cancel()
    assert out.put_texts == ["what did I ask?", "and one more thing\n\nthanks"]


async def test_after_new_a_plain_yes_still_answers_the_question(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # `/new` moves the conversation to a new session (`!room#1`): the question a turn asks
    # there is still the conversation's, and her plain "yes" answers it.
    settings, marker = shell_approval_settings(
        tmp_path, fake_llm.base_url, approvers=[OWNER], timeout_s=60
    )
    fake_llm.push(Reply(tool_calls=[("shell", {"command": RAN_COMMAND})]), "Done.")
    channel = MatrixLike()
    async with running_daemon(settings, [channel]):  # type: ignore[arg-type]
        channel.inject("/new", session="!room", sender=OWNER, source_id="m0")
        await channel.wait_for(1)
        channel.inject("run it", session="!room", sender=OWNER, source_id="m1")
        await channel.wait_for(2)
        question_id(channel.sent[1].text)
        channel.inject("yes", session="!room", sender=OWNER, source_id="m2")
        await channel.wait_for(3)
        await channel.wait_for(3, what="acked")
    assert channel.sent[2].text == "Done."
    assert marker.read_text().splitlines() == ["ran"]
