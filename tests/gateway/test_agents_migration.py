"""A data dir written by the one-agent layout, started with two agents: its sessions,
MEMORY.md, cron jobs, parked items and handled ids are the default agent's. The parked
items are still listed and retried (the kept reply sent, a turn run by the default agent),
nothing old is answered again, and the other agent sees none of it. No format step is
needed for this (store/format.py): what has no agent is the default agent's."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from squidd.cli import main
from squidd.core.cron_service import CronJobs
from squidd.core.models import Inbound, Outbound, SessionId
from squidd.core.poison import Parked, ParkState, parked_id
from squidd.store.cron_jobs import JobsFile
from squidd.store.parked import ParkedDir
from tests.support.cli import logging_back_to_defaults as logging_back_to_defaults
from tests.support.config import data_dir_config, provider
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import eventually, make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio


@dataclass
class BrokenFor(MemoryChannel):
    """A send to `broken` raises a defect (not a passing failure): the message is parked
    after its attempts, its reply kept."""

    broken: str = ""

    async def send(self, outbound: Outbound) -> None:
        if outbound.target == self.broken:
            raise ValueError("scripted defect in the channel's send")
        await super().send(outbound)


def _model(name: str) -> Any:
    def answer(request: dict[str, Any]) -> Reply:
        said = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
        if str(said).startswith("remember "):
            if request["messages"][-1]["role"] == "tool":
                return Reply(content="noted")
            return Reply(tool_calls=[("memory_write", {"content": said.removeprefix("remember ")})])
        return Reply(content=f"{name} answers: {said}")

    return answer


def _interrupted() -> Parked:
    """An item parked by the one-agent version when the daemon died in each attempt (no
    reply kept): its message has no agent, as every message then had none."""
    return Parked(
        id=parked_id("memory", "m4"),
        loop="message",
        channel="memory",
        source_id="m4",
        session_id="s",
        reason="the daemon stopped during each of 3 attempts",
        error="Interrupted",
        attempts=3,
        inbound=Inbound("memory", "m4", SessionId("s"), "u", "when is the boiler serviced?"),
        reply=None,
    )


async def test_a_one_agent_data_dir_goes_on_as_the_default_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    with FakeLLM(responder=_model("A")) as a, FakeLLM(responder=_model("B")) as b:
        before = make_settings(data, a.base_url, gateway={"parked_poll_s": 0.05})
        channel = BrokenFor("memory", broken="carol")
        async with running_daemon(before, [channel]):
            channel.inject("remember the boiler is serviced in May", session="s", source_id="m1")
            channel.inject("my name is Ada", session="s", source_id="m2")
            await channel.wait_for(2, what="acked")
            channel.inject("hello from carol", session="c", sender="carol", source_id="m3")
            folder = ParkedDir(data)
            await eventually(lambda: len(folder.list_sync()) == 1)
        folder.park_sync(_interrupted())
        service = CronJobs(JobsFile(data), default_timezone="UTC")
        await service.add("boiler", "remind me of the boiler", every="30d")
        asked_before = len(a.chat_requests)
        kept = {item.source_id: item for item in folder.list_sync()}
        assert kept["m3"].reply is not None and kept["m4"].reply is None
        agents = {"list": [{"name": "home"}, {"name": "work"}]}
        config = data_dir_config(tmp_path, data, agents=agents)
        capsys.readouterr()
        assert main(["parked", "list", "--config", str(config)]) == 0
        listed = capsys.readouterr().out
        for item in kept.values():
            assert item.id in listed
            assert main(["parked", "retry", item.id, "--config", str(config)]) == 0

        after = make_settings(
            data,
            a.base_url,
            gateway={"parked_poll_s": 0.05},
            llm={"providers": [provider("A", a), provider("B", b)], "chain": ["A/model-a"]},
            agents={"list": [{"name": "home"}, {"name": "work", "chain": ["B/model-b"]}]},
        )
        channel = MemoryChannel("memory")
        async with running_daemon(after, [channel]):
            channel.inject("my name is Ada", session="s", source_id="m2")  # redelivered
            await channel.wait_for(1, what="acked")
            await eventually(lambda: folder.list_sync() == [])
            await channel.wait_for(2)
            channel.inject("and my name?", session="s", source_id="m5")
            await channel.wait_for(3)
    sent = {(s.target, s.text) for s in channel.sent}
    assert sent == {
        ("carol", "A answers: hello from carol"),  # the kept reply, sent without a turn
        ("u", "A answers: when is the boiler serviced?"),  # the default agent's turn
        ("u", "A answers: and my name?"),
    }
    assert len(channel.sent) == 3  # m2 was answered before: not again
    new = a.chat_requests[asked_before:]
    assert len(new) == 2 and b.chat_requests == []  # work answered nothing of the old
    history = json.dumps(new[-1]["messages"])
    assert "my name is Ada" in history and "when is the boiler serviced?" in history
    assert "boiler is serviced in May" in new[-1]["messages"][0]["content"]  # old MEMORY.md
    [job] = await service.jobs()
    assert (job.name, job.agent) == ("boiler", "")  # the default agent's
    assert not (data / "agents" / "home").exists()  # the default's state did not move
    assert [p for p in folder.list_sync() if p.state is ParkState.PARKED] == []
