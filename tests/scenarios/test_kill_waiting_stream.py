"""A power cut while a streamed answer waits for an approval in a Matrix chat."""

from __future__ import annotations

import signal

import pytest

from squidd.store.approvals import QuestionFiles
from squidd.store.audit import AuditFile
from tests.support.fake_llm import Reply
from tests.support.matrix import start_squidd
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import Chat, matrix_config, ran

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

# Longer than `matrix.stream_first_chars`: it shows in the chat before the question.
FIRST = " ".join(["Let me see what takes the space first; this needs a command."] * 6)
SHELL = Reply(content=FIRST, tool_calls=[("shell", {"command": "echo ran >> ran.txt"})])


async def test_killed_while_a_streamed_answer_waits_then_one_answer_and_one_run(
    scene: MatrixScene,
) -> None:
    """Alice asks her bot to free some disk space. Its answer starts to stream into her
    chat, then it asks her, in a message of its own, before running a command. Before she
    answers, the machine loses power (the daemon is killed). When it is back she approves
    with `/approve <id>`: the command runs once, and the message that was streaming shows
    the answer, whole — no second copy, the question left as it was — and the model was not
    asked again for what it had already said."""
    scene.fake_llm.push(SHELL, "Freed 2 GB.")
    alice = await scene.make_human("alice")
    config = matrix_config(
        scene.tmp_path, scene.fake_llm.base_url, scene.synapse, scene.bot, [alice.user_id]
    )
    first = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd-1.log")
    room = await alice.room_with(scene.bot.user_id)
    chat = Chat(alice, scene.bot.user_id, room)
    asked = await alice.send(room, "free some disk space please")
    await alice.wait_for(
        lambda: any("Approval needed" in t for _, t in chat.replies(asked)), "the question", 60
    )
    _, question = chat.question(asked)
    [(streaming, shown)] = [m for m in chat.replies(asked) if "Approval needed" not in m[1]]
    assert shown.startswith("Let me see what takes the space first")
    await first.stop(signal.SIGKILL)
    [waiting] = QuestionFiles(scene.tmp_path / "data").waiting_sync()
    assert waiting.id == question and ran(scene.tmp_path) == 0

    second = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd-2.log")
    await alice.send(room, f"/approve {question}")
    await alice.wait_for(lambda: "Freed 2 GB." in chat.texts(), "the answer", timeout=60)
    scene.fake_llm.push("You're welcome.")
    thanks = await alice.send(room, "thanks")
    assert await chat.wait_reply(thanks) == "You're welcome."
    assert await second.stop() == 0

    assert ran(scene.tmp_path) == 1
    # The streamed message became the answer; the question is a message of its own.
    finished = [m.event.event_id for m, t in chat.replies(asked) if t == "Freed 2 GB."]
    assert finished == [streaming.event.event_id], chat.texts()
    assert chat.texts().count("Freed 2 GB.") == 1, chat.texts()
    assert len(chat.containing("Approval needed")) == 1, chat.texts()
    assert len(scene.fake_llm.chat_requests) == 3  # the recorded answer was not asked for again
    records = AuditFile(scene.tmp_path / "data").records()
    assert [(r["decision"], r["by"]) for r in records] == [("approved", alice.user_id)]
