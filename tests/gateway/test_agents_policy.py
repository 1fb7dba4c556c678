"""Each agent's own tool policy, approvals, caps and heartbeat (`[[agents.list]]`'s `tools`,
`approvals`, `limits` and `heartbeat` tables, key by key over the daemon's sections): the
same scripted model asks both agents for the same tool call, and what happens differs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from squidd.config import Settings
from tests.support.clock import FakeClock
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import RAN_COMMAND, make_settings, question_id, running_daemon, runs
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

OWNER = "alice"
REFUSED = "Over today's budget; ask again tomorrow."


def _shell(request: dict[str, Any]) -> Reply:
    """Asks for the shell; then says what the tool answered."""
    messages = request["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(content=f"tool said: {messages[-1]['content']}", usage=(60, 10, 0))
    return Reply(tool_calls=[("shell", {"command": RAN_COMMAND})], usage=(60, 10, 0))


def _two_agents(tmp_path: Path, llm: FakeLLM, **agents: dict[str, Any]) -> Settings:
    """Agents home (the default) and work, each in its own workspace, with the shell on and
    the daemon's policy and approvals letting it run; `agents` adds each one's own keys."""
    entries = []
    for name in ("home", "work"):
        workspace = tmp_path / f"{name}-ws"
        workspace.mkdir()
        entries.append({"name": name, "workspace": str(workspace), **agents.get(name, {})})
    return make_settings(
        tmp_path / "data",
        llm.base_url,
        agents={"list": entries},
        tools={
            "shell": {"enabled": True},
            "policy": {"default_deny": []},
            "approval": {"tools": [], "approvers": [OWNER], "timeout_s": 300},
        },
        limits={"refusal_text": REFUSED},
    )


def _offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


async def test_a_tool_one_agents_policy_allows_the_others_refuses(tmp_path: Path) -> None:
    with FakeLLM(responder=_shell) as llm:
        settings = _two_agents(tmp_path, llm, home={"tools": {"default_deny": ["shell"]}})
        channel = MemoryChannel("memory")
        async with running_daemon(settings, [channel]):
            channel.inject("run it", session="h", sender=OWNER, source_id="m1")
            await channel.wait_for(1)
            channel.inject("run it", session="w", sender=OWNER, source_id="m2", agent="work")
            await channel.wait_for(2)
    home, work = (llm.chat_requests[0], llm.chat_requests[2])
    assert "shell" not in _offered(home) and "shell" in _offered(work)
    assert runs(tmp_path / "home-ws" / "ran.txt") == 0  # asked for, never run
    assert runs(tmp_path / "work-ws" / "ran.txt") == 1
    assert channel.sent[0].text.startswith("tool said: Error: unknown tool 'shell'")
    # The daemon's own sections are unchanged: the terminal's default agent is home.
    assert settings.tools.policy.default_deny == []


async def test_only_the_agent_that_requires_approval_asks(tmp_path: Path) -> None:
    with FakeLLM(responder=_shell) as llm:
        settings = _two_agents(tmp_path, llm, work={"approvals": {"tools": ["shell"]}})
        channel = MemoryChannel("memory")
        async with running_daemon(settings, [channel]):
            channel.inject("run it", session="h", sender=OWNER, source_id="m1")
            await channel.wait_for(1)
            assert runs(tmp_path / "home-ws" / "ran.txt") == 1  # no question
            channel.inject("run it", session="w", sender=OWNER, source_id="m2", agent="work")
            await channel.wait_for(2)
            question = question_id(channel.sent[1].text, RAN_COMMAND)
            assert runs(tmp_path / "work-ws" / "ran.txt") == 0
            channel.inject(f"/approve {question}", sender=OWNER, session="w", source_id="m3")
            await channel.wait_for(3)
    assert channel.sent[0].text.startswith("tool said: ") and "Error" not in channel.sent[0].text
    assert channel.sent[2].text.startswith("tool said: ")
    assert runs(tmp_path / "work-ws" / "ran.txt") == 1
    [kept] = (tmp_path / "data" / "approvals" / "questions").glob("*.json")
    record = json.loads(kept.read_text())
    assert (record["agent"], record["state"], record["by"]) == ("work", "approved", OWNER)


async def test_an_agents_cap_counts_its_own_usage_and_the_daemons_still_holds(
    tmp_path: Path,
) -> None:
    with FakeLLM(responder=lambda _: Reply(content="fine", usage=(60, 10, 0))) as llm:
        settings = _two_agents(tmp_path, llm, work={"caps": {"daily_tokens": 100}})
        settings = settings.model_copy(
            update={"limits": settings.limits.model_copy(update={"daily_tokens": 400})}
        )
        channel = MemoryChannel("memory")
        turns = [("work", "w")] * 3 + [("home", "h")] * 5
        async with running_daemon(settings, [channel]) as daemon:
            for number, (agent, session) in enumerate(turns, 1):
                channel.inject(
                    "hi", session=session, sender=OWNER, source_id=f"m{number}", agent=agent
                )
                await channel.wait_for(number, what="acked")
            daemon_states = [s.scope for s in await daemon.caps.states()]
            work_states = {s.scope: s for s in await daemon.agent_caps["work"].states()}
    # Work: 70 tokens a turn, its third over its own 100. Home: not counted against work's
    # cap, but the daemon's 400 covers both: home's fifth turn (at 420) is refused.
    expected = ["fine", "fine", REFUSED, "fine", "fine", "fine", "fine", REFUSED]
    assert [sent.text for sent in channel.sent] == expected
    assert len(llm.chat_requests) == 6
    assert daemon_states == ["daily_tokens"]
    mine = work_states["daily_tokens of agent work"]
    assert (mine.used, mine.cap, mine.reached) == (140, 100, True)
    assert work_states["daily_tokens"].used == 420


def _checklist(request: dict[str, Any]) -> Reply:
    said = request["messages"][-1]["content"]
    return Reply(content="Water the plants!" if "plants" in said else "File the report!")


async def test_each_agents_heartbeat_reads_its_own_checklist_and_target(tmp_path: Path) -> None:
    with FakeLLM(responder=_checklist) as llm:
        settings = _two_agents(
            tmp_path,
            llm,
            home={"heartbeat": {"enabled": True, "target": "memory:home-owner"}},
            work={"heartbeat": {"enabled": True, "target": "memory:work-owner"}},
        )
        settings = settings.model_copy(
            update={
                "heartbeat": settings.heartbeat.model_copy(
                    update={"interval_minutes": 60, "active_hours": "00:00-24:00"}
                )
            }
        )
        (tmp_path / "home-ws" / "HEARTBEAT.md").write_text("- [ ] water the plants\n")
        (tmp_path / "work-ws" / "HEARTBEAT.md").write_text("- [ ] file the report\n")
        channel = MemoryChannel("memory")
        clock = FakeClock()
        async with running_daemon(settings, [channel], clock=clock) as daemon:
            assert sorted(daemon.heartbeats) == ["heartbeat", "heartbeat:work"]
            clock.advance(60 * 60)
            await channel.wait_for(2)
    sent = sorted((s.target, s.text) for s in channel.sent)
    assert sent == [("home-owner", "Water the plants!"), ("work-owner", "File the report!")]
    data = tmp_path / "data"
    assert list((data / "sessions").glob("heartbeat*.jsonl"))
    assert list((data / "agents" / "work" / "sessions").glob("heartbeat*.jsonl"))


def test_the_tables_merge_key_by_key_and_a_bad_key_names_its_path(tmp_path: Path) -> None:
    from squidd.config import load_settings
    from squidd.errors import ConfigError

    config = tmp_path / "config.toml"
    config.write_text(
        "[limits]\ndaily_cost = 3.0\nrefusal_text = 'No.'\n"
        "[heartbeat]\ninterval_minutes = 7\n"
        "[tools.approval]\napprovers = ['alice']\n"
        "[[agents.list]]\nname = 'home'\n"
        "[[agents.list]]\nname = 'work'\n"
        "[agents.list.approvals]\ntools = ['read_file']\n"
        "[agents.list.caps]\ndaily_tokens = 5\n"
        "[agents.list.heartbeat]\nenabled = true\ntarget = 'memory:x'\n"
    )
    settings = load_settings(config)
    work, home = settings.for_agent("work"), settings.for_agent("home")
    assert (work.tools.approval.tools, work.tools.approval.approvers) == (["read_file"], ["alice"])
    assert home.tools.approval.tools == ["shell"]
    assert (work.heartbeat.enabled, work.heartbeat.interval_minutes) == (True, 7)
    assert not home.heartbeat.enabled
    caps = settings.agent_caps("work")
    assert caps is not None and (caps.daily_tokens, caps.daily_cost) == (5, None)
    assert caps.refusal_text == "No." and settings.agent_caps("home") is None
    config.write_text("[[agents.list]]\nname = 'work'\n[agents.list.limits]\ndaily_tokens = -1\n")
    with pytest.raises(ConfigError, match=r"agents\.list\.0\.limits\.daily_tokens"):
        load_settings(config)


async def test_unattended_allowances_are_each_agents_own(tmp_path: Path) -> None:
    """Both heartbeats call the shell, which both agents ask for; only work's allows it
    for its heartbeat runs: work's runs, home's is denied and `squidd status` says so."""
    beat = {"enabled": True, "interval_minutes": 60, "active_hours": "00:00-24:00"}
    with FakeLLM(responder=_shell) as llm:
        settings = _two_agents(
            tmp_path,
            llm,
            home={"heartbeat": {**beat, "target": "memory:home-owner"}},
            work={
                "heartbeat": {**beat, "target": "memory:work-owner"},
                "approvals": {"unattended": {"heartbeat": ["shell"]}},
            },
        )
        tools = settings.tools.model_copy(
            update={"approval": settings.tools.approval.model_copy(update={"tools": ["shell"]})}
        )
        settings = settings.model_copy(update={"tools": tools})
        for name in ("home", "work"):
            (tmp_path / f"{name}-ws" / "HEARTBEAT.md").write_text("- [ ] run it\n")
        channel = MemoryChannel("memory")
        clock = FakeClock()
        async with running_daemon(settings, [channel], clock=clock) as daemon:
            clock.advance(60 * 60)
            await channel.wait_for(2)
            denied = (await daemon.snapshot())["unattended_denied"]
    said = dict((s.target, s.text) for s in channel.sent)
    assert said["work-owner"].startswith("tool said: ") and "Error" not in said["work-owner"]
    assert said["home-owner"].startswith("tool said: Error: not run")
    assert runs(tmp_path / "work-ws" / "ran.txt") == 1
    assert runs(tmp_path / "home-ws" / "ran.txt") == 0
    assert [(d["session"], d["tools"]) for d in denied] == [("heartbeat", ["shell"])]
