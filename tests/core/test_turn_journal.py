"""A turn cut short resumes from its journal (core/journal.py, store/journal.py).

A crash is played in-process by a tool that raises a BaseException: it escapes the turn the
way a SIGKILL ends it (nothing after it runs, the history is not written). A second
AgentLoop over a new JournalDir on the same data dir is the restarted daemon. The fault tests
(tests/faults/test_r6_turn_journal.py) do the same with real SIGKILLs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from squidd.core.agent import AgentLoop
from squidd.core.journal import Effect, effect_of
from squidd.core.memory import MemoryManager
from squidd.core.models import SessionId, ToolResult, utcnow
from squidd.core.resume import TurnRecording
from squidd.core.tools import ToolRegistry
from squidd.store.journal import JournalDir
from squidd.store.jsonl import JsonlStore
from tests.support.agent import agent_loop
from tests.support.fake_llm import Reply
from tests.support.mock_llm import MockLLM, scripted_llm
from tests.support.prompt import StaticPrompt

pytestmark = pytest.mark.anyio

SESSION = SessionId("cron:report")
TURN = "cron:report@2026-01-01T08:00:00+00:00"


class Crash(BaseException):
    """Ends the turn like a SIGKILL: nothing after it runs."""


class Appender:
    """A tool with an effect: appends a line to a list; may crash after or before it."""

    description = "Append a line."
    parameters: Mapping[str, Any] = {"type": "object", "properties": {"line": {"type": "string"}}}

    def __init__(self, name: str, effect: Effect | None, crash: str = "") -> None:
        self.name = name
        if effect is not None:
            self.effect = effect
        self.lines: list[str] = []
        self.crash = crash

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        if self.crash == "before":
            self.crash = ""
            raise Crash
        self.lines.append(str(arguments.get("line")))
        if self.crash == "after":
            self.crash = ""
            raise Crash
        return ToolResult(f"appended {arguments.get('line')}")


def daemon(
    data: Path, mock: MockLLM, tools: list[Any], **recording: Any
) -> tuple[AgentLoop, JsonlStore, JournalDir]:
    """One daemon life: the store, the journal and the loop on `data`."""
    llm, _ = scripted_llm(mock=mock)
    store = JsonlStore(data)
    journal = JournalDir(data)
    loop = agent_loop(
        llm=llm,
        memory=MemoryManager(store, llm, consolidation_threshold=100),
        registry=ToolRegistry(tools),
        prompt=StaticPrompt("test prompt"),
        recording=TurnRecording(journal, **recording),
    )
    return loop, store, journal


def asks(*calls: tuple[str, str]) -> Reply:
    return Reply(tool_calls=[(name, {"line": line}) for name, line in calls])


async def history(store: JsonlStore) -> list[tuple[str, str | None]]:
    window = await store.load_window(SESSION)
    return [(m.role, m.content) for m in window.messages]


async def crash_in_the_call(tmp_path: Path, mock: MockLLM, tool: Appender) -> JournalDir:
    """One daemon life whose turn asks for `tool` with "one" and dies in that call (the
    tool's own `crash`); the journal it leaves."""
    mock.push(asks((tool.name, "one")))
    loop, _, journal = daemon(tmp_path, mock, [tool])
    with pytest.raises(Crash):
        await loop.run(SESSION, "do it", "cron", turn_id=TURN)
    return journal


async def test_a_turn_without_tool_calls_writes_no_journal(tmp_path: Path) -> None:
    mock = MockLLM()
    mock.push("hello")
    loop, _, _ = daemon(tmp_path, mock, [])
    assert await loop.run(SESSION, "hi", "cron", turn_id=TURN) == "hello"
    assert not (tmp_path / "gateway" / "journal").exists()


async def test_a_tool_call_cut_short_with_a_side_effect_is_not_run_again(tmp_path: Path) -> None:
    mock = MockLLM()
    tool = Appender("append", Effect.SIDE_EFFECT, crash="after")
    await crash_in_the_call(tmp_path, mock, tool)
    assert tool.lines == ["one"] and len(mock.requests) == 1

    mock.push("I could not confirm the line was added.")
    loop, store, journal = daemon(tmp_path, mock, [tool])
    reply = await loop.run(SESSION, "do it", "cron", turn_id=TURN)
    assert reply == "I could not confirm the line was added."
    assert tool.lines == ["one"]  # not appended a second time
    # The recorded answer was not asked for again: one more request, the final one.
    assert len(mock.requests) == 2
    told = [m for m in mock.requests[1]["messages"] if m["role"] == "tool"]
    assert "interrupted" in told[0]["content"] and "not known" in told[0]["content"]
    turn = await history(store)
    assert [role for role, _ in turn] == ["user", "assistant", "tool", "assistant"]
    await journal.remove(TURN)
    assert not list((tmp_path / "gateway" / "journal").iterdir())


@pytest.mark.parametrize("effect", [Effect.IDEMPOTENT, Effect.READ_ONLY])
async def test_a_call_cut_short_that_may_run_twice_runs_again(
    tmp_path: Path, effect: Effect
) -> None:
    mock = MockLLM()
    tool = Appender("put", effect, crash="before")
    await crash_in_the_call(tmp_path, mock, tool)
    mock.push("done")
    loop, store, _ = daemon(tmp_path, mock, [tool])
    assert await loop.run(SESSION, "do it", "cron", turn_id=TURN) == "done"
    assert tool.lines == ["one"]
    assert len(mock.requests) == 2
    assert [m["content"] for m in mock.requests[1]["messages"] if m["role"] == "tool"] == [
        "appended one"
    ]
    assert len(await history(store)) == 4


async def test_recorded_results_are_used_and_the_turn_goes_on_from_the_first_step_without_one(
    tmp_path: Path,
) -> None:
    mock = MockLLM()
    mock.push(asks(("first", "a"), ("second", "b")))
    first = Appender("first", Effect.SIDE_EFFECT)
    second = Appender("second", Effect.SIDE_EFFECT, crash="before")
    loop, _, _ = daemon(tmp_path, mock, [first, second])
    with pytest.raises(Crash):
        await loop.run(SESSION, "do both", "cron", turn_id=TURN)
    assert first.lines == ["a"] and second.lines == []

    mock.push(asks(("second", "c")), "all done")
    second.crash = ""
    loop, store, _ = daemon(tmp_path, mock, [first, second])
    assert await loop.run(SESSION, "do both", "cron", turn_id=TURN) == "all done"
    assert first.lines == ["a"]  # its recorded result was used
    assert second.lines == ["c"]  # "b" started without a result: told, not run again
    assert len(mock.requests) == 3
    results = [m["content"] for m in mock.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0] == "appended a" and "interrupted" in results[1]
    roles = [role for role, _ in await history(store)]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]


async def test_a_journal_too_old_is_not_resumed_and_the_person_is_told(tmp_path: Path) -> None:
    mock = MockLLM()
    tool = Appender("append", Effect.SIDE_EFFECT, crash="after")
    await crash_in_the_call(tmp_path, mock, tool)

    later = utcnow() + timedelta(hours=25)
    loop, store, _ = daemon(tmp_path, mock, [tool], now=lambda: later)
    reply = await loop.run(SESSION, "do it", "cron", turn_id=TURN)
    assert "interrupted" in reply and "did not finish" in reply
    assert "append (interrupted, effect unknown)" in reply
    assert len(mock.requests) == 1 and tool.lines == ["one"]
    assert await history(store) == [("user", "do it"), ("assistant", reply)]


async def test_a_torn_journal_resumes_from_its_last_good_record_logged_once(
    tmp_path: Path,
) -> None:
    mock = MockLLM()
    tool = Appender("append", Effect.SIDE_EFFECT, crash="after")
    journal = await crash_in_the_call(tmp_path, mock, tool)
    path = journal.path(TURN)
    records = path.read_bytes().splitlines(keepends=True)
    assert [json.loads(r)["t"] for r in records] == ["answer", "start"]
    # The start record torn by the crash: only the answer is good.
    path.write_bytes(records[0] + records[1][:10])

    mock.push("done")
    loop, _, _ = daemon(tmp_path, mock, [tool])
    with capture_logs() as logs:
        assert await loop.run(SESSION, "do it", "cron", turn_id=TURN) == "done"
    assert [e["event"] for e in logs].count("turn_journal_damaged") == 1
    # No start on record: the call is run (the torn record never reached the disk whole).
    assert tool.lines == ["one", "one"]
    assert len(mock.requests) == 2
    kinds = [json.loads(r)["t"] for r in path.read_bytes().splitlines()]
    assert kinds == ["answer", "start", "result"]


async def test_a_configured_effect_overrides_the_tools_own(tmp_path: Path) -> None:
    mock = MockLLM()
    tool = Appender("append", None, crash="after")  # declares nothing: a side effect
    assert effect_of("append", tool, {}) is Effect.SIDE_EFFECT
    await crash_in_the_call(tmp_path, mock, tool)
    mock.push("done")
    loop, _, _ = daemon(tmp_path, mock, [tool], effects={"append": Effect.IDEMPOTENT})
    assert await loop.run(SESSION, "do it", "cron", turn_id=TURN) == "done"
    assert tool.lines == ["one", "one"]


async def test_a_turn_without_a_turn_id_keeps_no_journal(tmp_path: Path) -> None:
    mock = MockLLM()
    mock.push(asks(("append", "one")), "done")
    loop, _, _ = daemon(tmp_path, mock, [Appender("append", Effect.SIDE_EFFECT)])
    assert await loop.run(SESSION, "do it", "terminal") == "done"
    assert not (tmp_path / "gateway" / "journal").exists()


async def test_status_lists_the_journals_and_which_were_resumed(tmp_path: Path) -> None:
    from squidd.commands.status import format_status

    mock = MockLLM()
    tool = Appender("append", Effect.SIDE_EFFECT, crash="after")
    await crash_in_the_call(tmp_path, mock, tool)
    journal = JournalDir(tmp_path)
    [listed] = await journal.in_flight()
    assert listed["turn"] == TURN and listed["session"] == SESSION
    assert listed["tool_calls"] == 1 and listed["resumed"] is False
    await journal.load(TURN)
    [listed] = await journal.in_flight()
    assert listed["resumed"] is True
    text = format_status({"journal": [listed]})
    assert "turns with tool calls not yet delivered (journal):" in text
    assert f"{SESSION}" in text and "resumed" in text and "1 tool call(s)" in text


async def test_recording_the_message_as_done_drops_its_journal_and_a_sweep_finds_leftovers(
    tmp_path: Path,
) -> None:
    from squidd.core.models import ChannelName, SourceId
    from squidd.store.handled import HandledFile
    from squidd.store.journal import JournalCleanup

    mock = MockLLM()
    mock.push(asks(("append", "one")), asks(("append", "two")))
    tool = Appender("append", Effect.SIDE_EFFECT, crash="after")
    other = "cron:report@2026-01-02T08:00:00+00:00"
    for turn_id in (TURN, other):
        loop, _, _ = daemon(tmp_path, mock, [tool])
        tool.crash = "after"
        with pytest.raises(Crash):
            await loop.run(SESSION, "do it", "cron", turn_id=turn_id)
    journal, handled = JournalDir(tmp_path), HandledFile(tmp_path)
    channel, source = TURN.split(":", 1)
    await JournalCleanup(handled, journal).add(ChannelName(channel), SourceId(source))
    assert await journal.load(TURN) is None and await journal.load(other) is not None
    # Recorded as handled, its journal left behind (a crash in between): swept at start.
    channel, source = other.split(":", 1)
    await handled.add(ChannelName(channel), SourceId(source))
    assert await JournalDir(tmp_path).sweep(handled.contains) == 1
    assert await JournalDir(tmp_path).load(other) is None


class DurableFlags(JournalDir):
    """The real journal, noting which records asked to be safe from a power loss."""

    def __init__(self, data: Path) -> None:
        super().__init__(data)
        self.flags: list[tuple[str, bool]] = []

    async def started(self, turn: str, call: Any, *, durable: bool = True) -> None:
        self.flags.append((f"start {call.name}", durable))
        await super().started(turn, call, durable=durable)

    async def result(self, turn: str, call_id: str, content: str, *, durable: bool = True) -> None:
        self.flags.append(("result", durable))
        await super().result(turn, call_id, content, durable=durable)


async def test_only_a_call_that_must_not_run_twice_waits_for_the_disk(tmp_path: Path) -> None:
    """A side effect's start and result are fsync'd before the turn goes on; a read-only or
    idempotent call's are not (a power loss only runs it again), so a turn of two such calls
    costs the answer's fsync alone (bench: 7 fsyncs per two-call turn before, 3 now)."""
    mock = MockLLM()
    mock.push(asks(("look", "a"), ("set", "b"), ("append", "c")), "done")
    tools = [
        Appender("look", Effect.READ_ONLY),
        Appender("set", Effect.IDEMPOTENT),
        Appender("append", Effect.SIDE_EFFECT),
    ]
    llm, _ = scripted_llm(mock=mock)
    journal = DurableFlags(tmp_path)
    loop = agent_loop(
        llm=llm,
        memory=MemoryManager(JsonlStore(tmp_path), llm, consolidation_threshold=100),
        registry=ToolRegistry(tools),
        prompt=StaticPrompt("test prompt"),
        recording=TurnRecording(journal),
    )
    assert await loop.run(SESSION, "do it", "cron", turn_id=TURN) == "done"
    assert journal.flags == [
        ("start look", False),
        ("result", False),
        ("start set", False),
        ("result", False),
        ("start append", True),
        ("result", True),
    ]
    # Written all the same: a restart reads every record (a killed process loses none).
    replay = await JournalDir(tmp_path).load(TURN)
    assert replay is not None and set(replay.results) == set(replay.started)
    assert len(replay.results) == 3
