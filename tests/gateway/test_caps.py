"""Daily caps in the daemon: a session over its cap gets the fixed reply with no model
call, other sessions go on, the owner is told once per day on the configured target, and
the status snapshot shows the cap reached. The LLM is the scripted server reporting usage."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.commands.status import format_status
from tests.gateway.conftest import make_settings, running_daemon
from tests.support.fake_llm import FakeLLM, Reply
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
