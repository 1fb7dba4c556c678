"""The audit, status and `/status` per agent: each tool call's audit record names its agent
and the person who asked; `squidd audit --agent/--person` filter (a record from before
agents is the default agent's) and the chain still verifies across old and new records;
`squidd status --agent` and `/status` show that agent's own usage and caps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squidd.cli import main
from squidd.commands.status import agent_lines
from squidd.config import Settings
from squidd.core.audit import AuditEntry, Decision
from squidd.store.audit import ENTRY, AuditFile
from tests.support.cli import logging_back_to_defaults as logging_back_to_defaults
from tests.support.config import data_dir_config
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

AGENTS = [{"name": "home"}, {"name": "work", "caps": {"daily_tokens": 1000}}]


def _read_note(request: dict[str, Any]) -> Reply:
    messages = request["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(content=f"note: {messages[-1]['content']}", usage=(60, 10, 0))
    if str(messages[-1]["content"]).startswith("/"):
        return Reply(content="not a command")
    return Reply(tool_calls=[("read_file", {"path": "note.txt"})], usage=(60, 10, 0))


def _settings(tmp_path: Path, llm: FakeLLM) -> Settings:
    entries = []
    for entry in AGENTS:
        workspace = tmp_path / f"{entry['name']}-ws"
        workspace.mkdir()
        (workspace / "note.txt").write_text(f"{entry['name']}'s note")
        entries.append({**entry, "workspace": str(workspace)})
    return make_settings(tmp_path / "data", llm.base_url, agents={"list": entries})


def _old_record(data: Path) -> None:
    """A call as the version before agents wrote it: no agent, no person."""
    entry = AuditEntry(
        time="2026-01-02T03:04:05.000+00:00",
        session="s-old",
        channel="memory",
        tool="read_file",
        args_sha256="0" * 64,
        preview='{"path":"old.txt"}',
        decision=Decision.ALLOWED,
        by=None,
        duration_ms=1,
        result_chars=3,
        error=None,
    )
    fields = ENTRY.dump(entry)
    assert "agent" not in fields and "person" not in fields  # one agent: the lines as before
    AuditFile(data).append_sync(fields)


async def test_audit_records_name_agent_and_person_and_filter_by_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeLLM(responder=_read_note) as llm:
        settings = _settings(tmp_path, llm)
        _old_record(tmp_path / "data")
        channel = MemoryChannel("memory")
        async with running_daemon(settings, [channel]):
            channel.inject("read it", session="h", sender="alice", source_id="m1")
            await channel.wait_for(1)
            channel.inject("read it", session="w", sender="bob", source_id="m2", agent="work")
            await channel.wait_for(2)
    assert [s.text for s in channel.sent] == ["note: home's note", "note: work's note"]
    records = AuditFile(tmp_path / "data").records()
    named = [(r.get("agent"), r.get("person"), r["session"]) for r in records]
    assert named == [(None, None, "s-old"), ("home", "alice", "h"), ("work", "bob", "w")]

    config = data_dir_config(tmp_path, agents={"list": AGENTS})
    capsys.readouterr()
    assert main(["audit", "verify", "--config", str(config)]) == 0
    assert "audit log intact: 3 lines" in capsys.readouterr().out

    def listed(*extra: str) -> list[str]:
        assert main(["audit", "--config", str(config), *extra]) == 0
        return [line.split("  ")[3].split()[1] for line in capsys.readouterr().out.splitlines()]

    assert listed("--agent", "home") == ["s-old", "h"]  # from before agents: the default's
    assert listed("--agent", "work") == ["w"]
    assert listed("--person", "bob") == ["w"]
    assert main(["audit", "--config", str(config), "--agent", "nobody"]) == 2
    assert "no agent named 'nobody'" in capsys.readouterr().err


async def test_status_and_slash_status_show_the_agents_own_figures(tmp_path: Path) -> None:
    with FakeLLM(responder=_read_note) as llm:
        settings = _settings(tmp_path, llm)
        channel = MemoryChannel("memory")
        async with running_daemon(settings, [channel]) as daemon:
            channel.inject("read it", session="w", sender="bob", source_id="m1", agent="work")
            await channel.wait_for(1)
            channel.inject("read it", session="h", sender="alice", source_id="m2")
            await channel.wait_for(2)
            channel.inject("/status", session="w", sender="bob", source_id="m3", agent="work")
            await channel.wait_for(3)
            snapshot = await daemon.snapshot()
    work = "\n".join(agent_lines(snapshot["agents"], "work"))
    assert "usage today: 140 tokens in 2 calls" in work  # work's two calls, not home's
    assert "limit daily_tokens of agent work: 140 of 1000 - ok" in work
    assert "heartbeat: off" in work
    home = "\n".join(agent_lines(snapshot["agents"], "home"))
    assert "usage today: 140 tokens in 2 calls" in home and "limit" not in home
    assert snapshot["usage_today"]["total_tokens"] == 280  # the daemon's: both
    status = channel.sent[2].text
    assert "Agent: work, 140 tokens in 2 model calls today." in status
    assert "Cap daily_tokens of agent work: 140 of 1000." in status
