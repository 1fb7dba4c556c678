"""The usage ledger: every model call's reported usage, summed exactly by session, model
and purpose; days compacted without changing the sums; `squidd usage` prints plain
integers. The LLM is the real adapter over a mocked transport that reports usage."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pytest

from squidd.commands.usage import format_usage, parse_since
from squidd.core.agent import AgentLoop
from squidd.core.memory import MemoryManager
from squidd.core.models import SessionId, ToolResult
from squidd.core.tools import ToolRegistry
from squidd.core.usage import Price, group, totals
from squidd.store.jsonl import JsonlStore
from squidd.store.usage import UsageLedger
from tests.support.agent import agent_loop
from tests.support.fake_llm import Reply
from tests.support.mock_llm import scripted_llm
from tests.support.prompt import StaticPrompt

pytestmark = pytest.mark.anyio

SESSION = SessionId("matrix:!room:example.org")


class Clock:
    def __init__(self, when: datetime) -> None:
        self.when = when

    def __call__(self) -> datetime:
        return self.when


class PingTool:
    name = "ping"
    description = "Answer pong."
    parameters: ClassVar[dict[str, object]] = {"type": "object", "properties": {}}

    async def execute(self, arguments: object) -> ToolResult:
        return ToolResult("pong")


async def test_ledger_sums_match_the_scripted_usage_exactly(tmp_path: Path) -> None:
    llm, mock = scripted_llm(
        Reply(tool_calls=[("ping", {})], usage=(1200, 30, 1000)),
        Reply(content="pong it is", usage=(1300, 12, 1100)),
        Reply(content="hello", usage=(800, 5, 0)),
    )
    ledger = UsageLedger(tmp_path)
    store = JsonlStore(tmp_path / "data", workspace_dir=tmp_path / "ws")
    memory = MemoryManager(store, llm=llm, usage=ledger)
    loop = agent_loop(
        llm=llm,
        memory=memory,
        registry=ToolRegistry([PingTool()]),
        prompt=StaticPrompt("sys"),
        usage=ledger,
    )
    await loop.run(SESSION, "ping please", "matrix")
    await loop.run(SessionId("heartbeat"), "check", "heartbeat", purpose="heartbeat")
    assert mock.requests[0]["stream_options"] == {"include_usage": True}

    records = await ledger.read()
    all_ = totals(records, {})
    assert (all_.prompt_tokens, all_.completion_tokens, all_.cached_tokens) == (3300, 47, 2100)
    assert all_.calls == 3
    by_purpose = group(records, "purpose", {})
    assert by_purpose["turn"].prompt_tokens == 1200
    assert by_purpose["tool_step"].prompt_tokens == 1300
    assert by_purpose["heartbeat"].total_tokens == 805
    by_session = group(records, "session", {})
    assert by_session[SESSION].total_tokens == 2542
    # A new ledger (a restart) reads the same from the file.
    again = UsageLedger(tmp_path)
    assert totals(await again.today_records(), {}).total_tokens == 3347


async def test_a_provider_without_usage_breaks_nothing(tmp_path: Path) -> None:
    llm, _ = scripted_llm(Reply(content="hi"))
    ledger = UsageLedger(tmp_path)
    store = JsonlStore(tmp_path / "data", workspace_dir=tmp_path / "ws")
    loop = agent_loop(
        llm=llm,
        memory=MemoryManager(store),
        registry=ToolRegistry(),
        prompt=StaticPrompt("sys"),
        usage=ledger,
    )
    assert await loop.run(SESSION, "hello", "matrix") == "hi"
    assert await ledger.read() == []


async def test_consolidation_usage_is_filed_under_its_purpose(tmp_path: Path) -> None:
    llm, _ = scripted_llm(Reply(content="summary", usage=(500, 40, 0)))
    ledger = UsageLedger(tmp_path)
    store = JsonlStore(tmp_path / "data", workspace_dir=tmp_path / "ws")
    memory = MemoryManager(
        store, llm=llm, consolidation_threshold=4, keep_recent_ratio=0.5, usage=ledger
    )
    from squidd.core.models import Message

    await store.append_messages(
        SESSION,
        [Message(role="user" if i % 2 == 0 else "assistant", content=f"m{i}") for i in range(6)],
    )
    await memory.build_messages(SESSION, "sys", "next")
    records = await ledger.read()
    assert [(r.purpose, r.session, r.prompt_tokens) for r in records] == [
        ("consolidation", SESSION, 500)
    ]


async def test_days_turn_over_at_local_midnight_and_compact(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 3, 1, 22, 30, tzinfo=UTC))  # 23:30 in Berlin
    ledger = UsageLedger(tmp_path, timezone="Europe/Berlin", now=clock)
    for _ in range(3):
        await ledger.record(
            session="s", model="m", purpose="turn", prompt=10, completion=2, cached=1
        )
    assert ledger.today() == "2026-03-01"
    clock.when = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)  # 00:30 on the 2nd in Berlin
    assert ledger.today() == "2026-03-02"
    assert await ledger.today_records() == []
    await ledger.record(session="s", model="m", purpose="turn", prompt=7, completion=1, cached=0)

    before = totals(await ledger.read(), {})
    assert await ledger.compact_past_days() == 1
    day_file = tmp_path / "usage" / "2026-03-01.jsonl"
    assert len(day_file.read_text().splitlines()) == 1
    after = totals(await ledger.read(), {})
    assert after.to_dict() == before.to_dict()
    assert await ledger.compact_past_days() == 0


def test_usage_output_prices_and_plain_integers() -> None:
    from squidd.core.usage import UsageRecord

    records = [
        UsageRecord("2026-03-01", "a", "m", "turn", 1_000_000, 100_000, 500_000),
        UsageRecord("2026-03-01", "b", "m", "turn", 2000, 10, 0),
    ]
    prices = {"m": Price(input=1.0, output=4.0, cached_input=0.5)}
    text = format_usage(records, prices, by="session", title="today")
    first = text.splitlines()[0]
    assert "input    1002000" in first and "total    1102010" in first
    # 502000 fresh * 1.0 + 500000 * 0.5 + 100010 * 4.0, per million
    assert "cost 1.1520" in first
    assert text.splitlines()[1] == "by session:"
    assert text.splitlines()[2].lstrip().startswith("a ")


def test_since_accepts_days_and_dates() -> None:
    from datetime import date

    today = date(2026, 3, 10)
    assert parse_since("7d", today) == date(2026, 3, 4)
    assert parse_since("2026-03-01", today) == date(2026, 3, 1)


def ping_then_answer(tmp_path: Path, ledger: UsageLedger) -> AgentLoop:
    """An agent whose model calls the ping tool once, then answers: a two-round turn."""
    llm, _ = scripted_llm(
        Reply(tool_calls=[("ping", {})], usage=(10, 1, 0)), Reply(content="ok", usage=(20, 2, 0))
    )
    store = JsonlStore(tmp_path / "data", workspace_dir=tmp_path / "ws")
    return agent_loop(
        llm=llm,
        memory=MemoryManager(store),
        registry=ToolRegistry([PingTool()]),
        prompt=StaticPrompt("sys"),
        usage=ledger,
    )


async def test_a_sub_agent_files_its_calls_under_its_purpose(tmp_path: Path) -> None:
    ledger = UsageLedger(tmp_path)
    loop = ping_then_answer(tmp_path, ledger)
    await loop.run(SessionId("spawn:1"), "task", "spawn", purpose="sub_agent")
    assert {r.purpose for r in await ledger.read()} == {"sub_agent"}


async def test_the_purpose_comes_from_the_caller_not_the_channel_name(tmp_path: Path) -> None:
    """A turn on a channel called "cron" is filed by round unless the caller names its purpose."""
    ledger = UsageLedger(tmp_path)
    loop = ping_then_answer(tmp_path, ledger)
    await loop.run(SessionId("cron:x"), "go", "cron")
    assert [r.purpose for r in await ledger.read()] == ["turn", "tool_step"]
