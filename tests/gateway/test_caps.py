"""Daily caps in the daemon: a session over its cap gets the fixed reply with no model
call, other sessions go on, the owner is told once per day on the configured target, and
the status snapshot shows the cap reached. The LLM is the scripted server reporting usage."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from squidd.commands.status import format_status
from squidd.core.cron import make_job
from squidd.core.models import utcnow
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import eventually, make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

REFUSAL = "Daily budget used up."


async def test_a_session_over_its_daily_cap_gets_the_fixed_reply_without_a_model_call(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings = make_settings(
        tmp_path / "data",
        fake_llm.base_url,
        limits={
            "session_daily_tokens": 1000,
            "notify_target": "memory:owner",
            "refusal_text": REFUSAL,
        },
    )
    fake_llm.push(
        Reply(content="first answer", usage=(900, 100, 0)),  # 1000 tokens: the cap
        Reply(content="other session", usage=(50, 5, 0)),
    )
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]) as daemon:
        channel.inject("hello", session="spendy", sender="alice")
        await channel.wait_for(1)
        channel.inject("again", session="spendy", sender="alice")
        await channel.wait_for(3)  # the refusal and the owner's notice
        channel.inject("and again", session="spendy", sender="alice")
        channel.inject("hi", session="thrifty", sender="bob")
        await channel.wait_for(5)
        snapshot = await daemon.snapshot()
    assert len(fake_llm.chat_requests) == 2
    to_alice = [s.text for s in channel.sent if s.target == "alice"]
    assert to_alice == ["first answer", REFUSAL, REFUSAL]
    assert [s.text for s in channel.sent if s.target == "bob"] == ["other session"]
    notices = [s.text for s in channel.sent if s.target == "owner"]
    assert len(notices) == 1 and "session_daily_tokens" in notices[0]
    assert snapshot["usage_today"]["total_tokens"] == 1055
    text = format_status(snapshot)
    assert "usage today" in text and "1055 tokens" in text


async def test_daemon_cap_shows_in_status_when_reached(tmp_path: Path, fake_llm: FakeLLM) -> None:
    settings = make_settings(tmp_path / "data", fake_llm.base_url, limits={"daily_tokens": 100})
    fake_llm.push(Reply(content="ok", usage=(100, 1, 0)))
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]) as daemon:
        channel.inject("hello", session="a", sender="alice")
        await channel.wait_for(1)
        snapshot = await daemon.snapshot()
    assert snapshot["limits"] == [
        {"scope": "daily_tokens", "used": 101, "cap": 100, "reached": True}
    ]
    assert "limit daily_tokens: 101 of 100 today - REACHED" in format_status(snapshot)


async def test_heartbeat_and_cron_caps_refuse_only_their_own_runs(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The heartbeat over its cap gets its quiet reply (nothing sent), cron over its cap the
    fixed reply; neither cap touches the other's runs or a channel's messages."""
    data = tmp_path / "data"
    limits = {
        "heartbeat_daily_tokens": 100,
        "cron_daily_tokens": 100,
        "notify_target": "memory:owner",
        "refusal_text": REFUSAL,
    }
    settings = make_settings(data, fake_llm.base_url, limits=limits)
    fake_llm.push(
        Reply(content="HEARTBEAT_OK", usage=(100, 1, 0)),  # the heartbeat's cap
        Reply(content="cron report", usage=(100, 1, 0)),  # cron's cap
        Reply(content="still here", usage=(10, 1, 0)),
    )
    now = utcnow()
    job = make_job(
        "report", "daily report", every="1h", timezone="UTC", target="memory:room", now=now
    )
    channel = MemoryChannel("memory")

    def no_runs_left() -> bool:
        return not list((data / "gateway" / "runs").iterdir())

    async with running_daemon(settings, [channel]) as daemon:
        await daemon.scheduled.fire_heartbeat("check", now)
        await eventually(no_runs_left)
        await daemon.scheduled.fire_heartbeat("check", now + timedelta(minutes=30))
        await channel.wait_for(1)  # the owner's notice; the refused beat itself stays quiet
        await eventually(no_runs_left)
        await daemon.scheduled.fire_cron(job, now)
        await channel.wait_for(2)
        await daemon.scheduled.fire_cron(job, now + timedelta(hours=1))
        await channel.wait_for(3)
        channel.inject("hi", session="alice", sender="alice")
        await channel.wait_for(4)
    assert len(fake_llm.chat_requests) == 3
    sent = [(s.target, s.text) for s in channel.sent]
    assert sent[0][0] == "owner" and "heartbeat_daily_tokens" in sent[0][1]
    assert sent[1:] == [("room", "cron report"), ("room", REFUSAL), ("alice", "still here")]
