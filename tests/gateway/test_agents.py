"""Several assistants in one daemon: two agents with their own workspace (SOUL.md) and
provider chain, routed by the address a message was sent to and by the agent a message
names; their sessions, memory and usage apart; a config without agents as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from squidd.commands.status import agent_lines
from squidd.core.cron_service import CronJobs
from squidd.store.cron_jobs import JobsFile
from tests.support.config import provider
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

CANARY = "CANARY-work-only-51c"


def _model(request: dict[str, Any]) -> Reply:
    messages = request["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(content="noted", usage=(50, 2, 0))
    said = [m for m in messages if m["role"] == "user"][-1]["content"]
    if str(said).startswith("remember "):
        return Reply(tool_calls=[("memory_write", {"content": said.removeprefix("remember ")})])
    soul = "home" if "I am Home" in messages[0]["content"] else "work"
    return Reply(content=f"{soul} says: {said}", usage=(50, 3, 0))


def _settings(tmp_path: Path, a: FakeLLM, b: FakeLLM) -> Any:
    home, work = tmp_path / "home-ws", tmp_path / "work-ws"
    for folder, soul in ((home, "I am Home."), (work, "I am Work.")):
        folder.mkdir()
        (folder / "SOUL.md").write_text(soul)
    return make_settings(
        tmp_path / "data",
        a.base_url,
        llm={
            "providers": [provider("A", a), provider("B", b)],
            "chain": ["A/model-a"],
        },
        agents={
            "list": [
                {"name": "home", "workspace": str(home)},
                {
                    "name": "work",
                    "workspace": str(work),
                    "chain": ["B/model-b"],
                    "addresses": ["bot+work@example.org"],
                },
            ]
        },
    )


async def test_two_agents_answer_from_their_own_soul_and_chain(tmp_path: Path) -> None:
    with FakeLLM(responder=_model) as a, FakeLLM(responder=_model) as b:
        settings = _settings(tmp_path, a, b)
        channel = MemoryChannel("memory")
        sends = [
            ("hello home", {"recipients": ("bot@example.org",)}),
            ("hello work", {"recipients": ("Bot+Work@example.org",)}),
            (f"remember {CANARY}", {"agent": "work", "session": "w2"}),
            ("what do you remember?", {"session": "h2"}),
            ("and you?", {"agent": "work", "session": "w2"}),
            ("unknown agent", {"agent": "nobody", "session": "h3"}),
        ]
        async with running_daemon(settings, [channel]) as daemon:
            for number, (text, extra) in enumerate(sends, 1):
                fields = {"session": f"s{number}", **extra}
                channel.inject(text, source_id=f"m{number}", **fields)
                await channel.wait_for(number, what="acked")
            snapshot = await daemon.snapshot()
    lines = agent_lines(snapshot["agents"], "work")
    assert lines[1].startswith("  work: workspace ") and "bot+work@example.org" in lines[1]
    assert any("B/model-b" in line for line in lines)
    replies = [sent.text for sent in channel.sent]
    assert replies[0] == "home says: hello home"  # A's model, Home's SOUL
    assert replies[1] == "work says: hello work"  # B's model, Work's SOUL
    assert replies[5] == "home says: unknown agent"  # no such agent: the default
    assert all(r["model"] == "model-a" for r in a.chat_requests)
    assert all(r["model"] == "model-b" for r in b.chat_requests)
    # Work's memory is Work's: in its workspace, in its later prompt, never in Home's.
    assert CANARY in (tmp_path / "work-ws" / "MEMORY.md").read_text()
    assert not (tmp_path / "home-ws" / "MEMORY.md").exists()
    assert all(CANARY not in json.dumps(r) for r in a.chat_requests)
    assert CANARY in b.chat_requests[-1]["messages"][0]["content"]
    # Sessions apart: Home's where they always were, Work's under agents/work/.
    data = tmp_path / "data"
    assert len(list((data / "sessions").glob("*.jsonl"))) == 3
    assert len(list((data / "agents" / "work" / "sessions").glob("*.jsonl"))) == 2
    usage = [
        json.loads(line)
        for path in (data / "usage").glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert {(u["agent"], u["provider"]) for u in usage} == {("home", "A"), ("work", "B")}


async def test_a_data_dir_from_before_agents_is_the_default_agents(tmp_path: Path) -> None:
    """Made by the previous version's layout (one agent): a session, MEMORY.md, a cron job,
    a handled message. Started with two agents: the default agent continues the session
    with the old memory, the old message is not answered again, the job is listed."""
    with FakeLLM(responder=_model) as a, FakeLLM(responder=_model) as b:
        before = make_settings(tmp_path / "data", a.base_url)
        channel = MemoryChannel("memory")
        async with running_daemon(before, [channel]):
            channel.inject("remember the boiler is serviced in May", session="s", source_id="m1")
            await channel.wait_for(1, what="acked")
            channel.inject("my name is Ada", session="s", source_id="m2")
            await channel.wait_for(2, what="acked")
        jobs = JobsFile(tmp_path / "data")
        service = CronJobs(jobs, default_timezone="UTC")
        await service.add("boiler", "remind me of the boiler", every="30d")
        asked_before = len(a.chat_requests)

        after = make_settings(
            tmp_path / "data",
            a.base_url,
            llm={"providers": [provider("A", a), provider("B", b)], "chain": ["A/model-a"]},
            agents={"list": [{"name": "home"}, {"name": "work", "chain": ["B/model-b"]}]},
        )
        channel = MemoryChannel("memory")
        async with running_daemon(after, [channel]):
            channel.inject("my name is Ada", session="s", source_id="m2")  # redelivered
            channel.inject("what is my name?", session="s", source_id="m3")
            await channel.wait_for(2, what="acked")
    assert len(channel.sent) == 1  # m2 was answered before: not again
    [request] = a.chat_requests[asked_before:]
    history = json.dumps(request["messages"])
    assert "my name is Ada" in history  # the old session goes on
    assert "boiler is serviced in May" in request["messages"][0]["content"]  # old MEMORY.md
    assert b.chat_requests == []
    [job] = await service.jobs()
    assert (job.name, job.agent) == ("boiler", "")  # the default agent's


async def test_each_agents_chain_learns_its_local_servers_window(tmp_path: Path) -> None:
    from tests.support.local_servers import ScriptedOllama

    models = {"qwen3:8b": {"trained": 40960, "num_ctx": None, "loaded": 4096}}
    with FakeLLM(responder=_model) as a, ScriptedOllama(models) as local:
        settings = make_settings(
            tmp_path / "data",
            a.base_url,
            llm={
                "providers": [
                    provider("A", a),
                    {"name": "local", "kind": "ollama", "base_url": local.root},
                ],
                "chain": ["A/model-a"],
            },
            agents={"list": [{"name": "home"}, {"name": "work", "chain": ["local/qwen3:8b"]}]},
        )
        async with running_daemon(settings, [MemoryChannel("memory")]) as daemon:
            budgets = {name: agent.memory.budget for name, agent in daemon.runtime.agents.items()}
    assert budgets["work"] is not None and budgets["work"].context_window == 4096
    assert budgets["home"] is not None and budgets["home"].context_window == 128_000
