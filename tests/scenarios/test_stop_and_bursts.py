"""A Matrix turn waiting for an approval, and what the person does meanwhile: `/stop`, or
several quick messages (default debounce, answers streaming)."""

from __future__ import annotations

from typing import Any

import pytest

from squidd.store.approvals import QuestionFiles
from tests.support.fake_llm import Reply
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import ask_until_approval, ran, react

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

SHELL = Reply(tool_calls=[("shell", {"command": "echo ran >> ran.txt"})])


def user_texts(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"] if m["role"] == "user")


async def test_stop_while_a_turn_waits_for_an_approval(
    scene: MatrixScene,
) -> None:
    """Alice asks her bot to clean up; it asks before running a shell command. She thinks
    better of it and sends `/stop`: she is told the turn stopped and its question no longer
    waits (nor is it offered anywhere), and a ✅ she then puts on it by habit runs nothing.
    Her next message is answered as usual."""
    scene.fake_llm.push(SHELL)
    alice, daemon, room, chat, _asked, prompt, question = await ask_until_approval(
        scene, "clean up my home folder"
    )

    stop = await alice.send(room, "/stop")
    assert await chat.wait_reply(stop) == (
        f"Stopped the turn that was running; its approval question {question} no longer waits."
    )
    assert QuestionFiles(scene.tmp_path / "data").waiting_sync() == []
    await react(alice, room, prompt.event.event_id, "✅")
    scene.fake_llm.push("Hello!")
    hello = await alice.send(room, "hello")
    assert await chat.wait_reply(hello) == "Hello!"
    assert await daemon.stop() == 0

    assert ran(scene.tmp_path) == 0
    assert len(scene.fake_llm.chat_requests) == 2  # the stopped turn's first call, and "hello"
    assert "hello" in user_texts(scene.fake_llm.chat_requests[-1])


async def test_a_burst_while_a_turn_waits_for_an_approval_is_one_turn_after_it(
    scene: MatrixScene,
) -> None:
    """Alice asks her bot to back up her notes; it asks before running a command. Before
    she answers, she sends three quick messages about something else. Then she approves with
    `/approve <id>`: the command runs once and the first answer comes; her three messages
    are then answered together, in one turn that saw all three."""
    scene.fake_llm.push(SHELL, "Backed up.", "Here is what you asked, all three points.")
    alice, daemon, room, chat, _asked, _, question = await ask_until_approval(
        scene, "back up my notes"
    )
    burst = [
        await alice.send(room, text)
        for text in ("also, what is on today?", "and the weather?", "and tomorrow?")
    ]
    await alice.send(room, f"/approve {question}")
    await chat.wait_text("Backed up.")
    await chat.wait_text("all three points")
    assert await daemon.stop() == 0

    assert ran(scene.tmp_path) == 1
    assert (
        len(scene.fake_llm.chat_requests) == 3
    )  # the asking turn's two calls, then one for the burst
    together = user_texts(scene.fake_llm.chat_requests[-1])
    assert all(t in together for t in ("what is on today?", "the weather?", "tomorrow?"))
    assert "/approve" not in together
    replies = [seen for seen, text in chat.messages() if "all three points" in text]
    assert len(replies) == 1
    relation = replies[0].content.get("m.relates_to") or {}
    assert (relation.get("m.in_reply_to") or {}).get("event_id") in burst
