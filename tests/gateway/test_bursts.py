"""Bursts through the running daemon: three messages sent 200 ms apart get one answer that
saw all three, every one acknowledged only after it went out; messages that come while the
conversation's turn runs are answered together in the next turn; a command is not merged;
`debounce_ms = 0` answers one by one; `/usr is full` is no command and is merged."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from squidd.store.handled import HandledFile
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio


def _users(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


async def test_three_quick_messages_get_one_answer_that_saw_all_three(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    fake_llm.push(Reply(content="one answer"))
    channel = MatrixLike()
    async with running_daemon(settings, [channel]):
        for text in ("hi", "can you", "check the logs?"):
            channel.inject(text, session="!room", source_id=f"m-{text}")
            await anyio.sleep(0.2)
        await channel.wait_for(3, what="acked")
    assert [s.text for s in channel.sent] == ["one answer"]
    assert len(fake_llm.chat_requests) == 1
    assert _users(fake_llm.chat_requests[0])[-1] == "hi\n\ncan you\n\ncheck the logs?"
    assert channel.acked == ["m-hi", "m-can you", "m-check the logs?"]


async def test_messages_during_a_turn_are_answered_together_next(tmp_path: Path) -> None:
    asked = threading.Event()
    release = threading.Event()

    def gated(request: dict[str, Any]) -> Reply:
        if not asked.is_set():
            asked.set()
            release.wait(60)
        return Reply(content=f"answer to: {_users(request)[-1]}")

    channel = MatrixLike(quiet_s=0.05)
    with FakeLLM(responder=gated) as llm:
        settings = make_settings(tmp_path / "data", llm.base_url)
        try:
            async with running_daemon(settings, [channel]):
                channel.inject("first", session="!room", source_id="m1")
                assert await anyio.to_thread.run_sync(asked.wait, 60)
                channel.inject("second", session="!room", source_id="m2")
                channel.inject("third", session="!room", source_id="m3")
                await anyio.sleep(0.2)
                assert channel.acked == []  # nothing acknowledged before its answer
                release.set()
                await channel.wait_for(3, what="acked")
        finally:
            release.set()
        requests = llm.chat_requests
    assert [s.text for s in channel.sent] == ["answer to: first", "answer to: second\n\nthird"]
    assert len(requests) == 2
    assert channel.acked == ["m1", "m2", "m3"]


async def test_debounce_0_answers_one_by_one(tmp_path: Path, fake_llm: FakeLLM) -> None:
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    fake_llm.push(Reply(content="a"), Reply(content="b"))
    channel = MatrixLike(quiet_s=None)
    async with running_daemon(settings, [channel]):
        channel.inject("one", session="!room", source_id="m1")
        channel.inject("two", session="!room", source_id="m2")
        await channel.wait_for(2, what="acked")
    assert [s.text for s in channel.sent] == ["a", "b"]


async def test_a_command_is_never_merged_and_keeps_its_place(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    fake_llm.push(Reply(content="answer"))
    channel = MatrixLike()
    async with running_daemon(settings, [channel]):
        channel.inject("hello", session="!room", source_id="m1")
        channel.inject("/help", session="!room", source_id="m2")
        await channel.wait_for(2, what="acked")
    assert channel.sent[0].text == "answer"
    assert channel.sent[1].text.startswith("Commands:")


async def test_a_message_answered_before_a_restart_is_not_answered_again_with_a_newer_one(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # A restart between an answer's record and the message's acknowledgement brings the
    # message again, and the person's next message comes within the quiet window. Merged,
    # the old question was answered a second time (ten sessions at once and a SIGKILL,
    # tests/scenarios/test_household_at_once.py); alone, it is only acknowledged.
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    await HandledFile(tmp_path / "data").add("matrix", "m-old")
    fake_llm.push(Reply(content="dessert: an apple"))
    channel = MatrixLike()
    async with running_daemon(settings, [channel]):
        channel.inject("what's for dinner?", session="!room", source_id="m-old")
        channel.inject("and dessert?", session="!room", source_id="m-new")
        await channel.wait_for(2, what="acked")
    assert [s.text for s in channel.sent] == ["dessert: an apple"]
    assert len(fake_llm.chat_requests) == 1
    assert _users(fake_llm.chat_requests[0])[-1] == "and dessert?"
    assert sorted(channel.acked) == ["m-new", "m-old"]


class MatrixLike(MemoryChannel):
    """The memory channel under the name `matrix`, declaring a quiet window as Matrix does
    (`matrix.debounce_ms`, 1500 by default; None: `debounce_ms = 0`)."""

    def __init__(self, quiet_s: float | None = 1.5) -> None:
        super().__init__("matrix")
        self._quiet_s = quiet_s

    def quiet_window_s(self) -> float | None:
        return self._quiet_s
