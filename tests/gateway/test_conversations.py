"""Chat commands that change a conversation, through the running daemon: `/new` empties the
window the next turn sees (the old history stays on disk), `/model` switches the model of
this conversation only, `/status` says where it stands, and `/stop` cancels a slow turn while
it runs: the person is told, and nothing reaches the model twice."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from squidd.fs import safe_name
from squidd.gateway.conversations import STOPPED
from squidd.store.conversations import ConversationsFile
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio


def _seen(request: dict[str, object]) -> str:
    return str(request["messages"])


async def test_new_starts_an_empty_session_and_keeps_the_old_history(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    data = tmp_path / "data"
    settings = make_settings(data, fake_llm.base_url)
    fake_llm.push(Reply(content="noted the walrus"), Reply(content="fresh start"))
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]):
        channel.inject("my pet is a walrus called Olaf", session="room", source_id="m1")
        await channel.wait_for(1, what="acked")
        channel.inject("/new", session="room", source_id="m2")
        await channel.wait_for(2, what="acked")
        channel.inject("what is my pet called?", session="room", source_id="m3")
        await channel.wait_for(3, what="acked")
    assert channel.sent[1].text.startswith("Started a new conversation")
    assert len(fake_llm.chat_requests) == 2
    assert "Olaf" in _seen(fake_llm.chat_requests[0])
    assert "Olaf" not in _seen(fake_llm.chat_requests[1])
    old = (data / "sessions" / f"{safe_name('room')}.jsonl").read_text()
    assert "Olaf" in old and "what is my pet called" not in old
    assert await ConversationsFile(data).session("room") == "room#1"
    new = (data / "sessions" / f"{safe_name('room#1')}.jsonl").read_text()
    assert "what is my pet called" in new and "Olaf" not in new
    assert not (data / "memory" / safe_name("room#1")).exists()  # its summary starts empty


async def test_model_switches_this_conversation_only(tmp_path: Path, fake_llm: FakeLLM) -> None:
    settings = make_settings(
        tmp_path / "data", fake_llm.base_url, llm={"fallback_models": ["big-model"]}
    )
    fake_llm.push(Reply(content="from big"), Reply(content="from default"))
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]):
        channel.inject("/model nonesuch", session="a", source_id="m1")
        await channel.wait_for(1, what="acked")
        channel.inject("/model big-model", session="a", source_id="m2")
        await channel.wait_for(2, what="acked")
        channel.inject("hello", session="a", source_id="m3")
        await channel.wait_for(3, what="acked")
        channel.inject("hello", session="b", source_id="m4")
        await channel.wait_for(4, what="acked")
        channel.inject("/status", session="a", source_id="m5")
        await channel.wait_for(5, what="acked")
    texts = [sent.text for sent in channel.sent]
    assert "No model named 'nonesuch'" in texts[0] and "big-model" in texts[0]
    assert texts[1] == "Model for this conversation: big-model."
    assert [r["model"] for r in fake_llm.chat_requests] == ["big-model", settings.llm.model]
    assert "Model: big-model" in texts[4] and "Session: a " in texts[4]


async def test_stop_cancels_a_slow_turn_and_says_so(tmp_path: Path) -> None:
    asked = threading.Event()
    release = threading.Event()

    def slow_first(request: dict[str, Any]) -> Reply:
        if not asked.is_set():
            asked.set()
            release.wait(60)  # the model takes its time: long after the /stop
            return Reply(content="too late")
        return Reply(content="after the stop")

    data = tmp_path / "data"
    channel = MemoryChannel("memory")
    with FakeLLM(responder=slow_first) as llm:
        settings = make_settings(data, llm.base_url)
        try:
            async with running_daemon(settings, [channel]):
                channel.inject("write me a very long essay", session="s", source_id="m1")
                assert await anyio.to_thread.run_sync(asked.wait, 60)
                channel.inject("/stop", session="s", source_id="m2")
                await channel.wait_for(2, what="acked")
                channel.inject("/stop", session="s", source_id="m3")
                await channel.wait_for(3, what="acked")
                channel.inject("and now?", session="s", source_id="m4")
                await channel.wait_for(4, what="acked")
        finally:
            release.set()
        requests = llm.chat_requests
    texts = [sent.text for sent in channel.sent]
    assert texts == [
        STOPPED,
        "Stopped the turn that was running.",
        "Nothing was running.",
        "after the stop",
    ]
    # The next turn sees the stopped request and the note, never the stopped answer.
    assert len(requests) == 2
    assert "write me a very long essay" in _seen(requests[-1])
    assert "cancelled the work" in _seen(requests[-1]) and "too late" not in _seen(requests[-1])
    history = (data / "sessions" / f"{safe_name('s')}.jsonl").read_text()
    assert history.count("write me a very long essay") == 1
