"""An approval question on Matrix outlives a SIGKILL: the real daemon, against the real
Synapse, asks before the shell runs and is killed while the question waits; after the
restart the question is still open, the message comes back (its sync position was not
confirmed) and its turn resumes from the journal without asking the model again; Alice's ✅
on the prompt runs the command exactly once, and one answer reaches the room."""

from __future__ import annotations

import signal

import pytest

from squidd.store.approvals import QuestionFiles
from squidd.store.audit import AuditFile
from tests.channels.matrix.test_approvals import SHELL, config_for, prompt_of, react
from tests.support.matrix_daemon import MatrixScene

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow, pytest.mark.timeout(300)]


async def test_killed_while_waiting_then_a_reaction_runs_the_command_once(
    scene: MatrixScene,
) -> None:
    alice = await scene.make_human("alice")
    room = await alice.create_room([scene.bot.user_id], direct=True)
    (scene.tmp_path / "ws").mkdir()
    marker = scene.tmp_path / "ws" / "ran.txt"
    config = config_for(
        scene.tmp_path, scene.fake_llm, scene.synapse, scene.bot, [alice.user_id], room
    )
    scene.fake_llm.push(SHELL, "done")
    first = await scene.matrix_squidd.again(config, "squidd-1.log")
    await alice.wait_for(lambda: alice.membership(room, scene.bot.user_id) == "join", "bot joins")

    asked = await alice.send(room, "run it")
    await alice.wait_for(lambda: alice.replies_to(scene.bot.user_id, asked), "the prompt")
    prompt = alice.replies_to(scene.bot.user_id, asked)[0]
    question = prompt_of(prompt.content["body"])
    await first.stop(signal.SIGKILL)
    [waiting] = QuestionFiles(scene.tmp_path / "data").waiting_sync()
    assert waiting.id == question and not marker.exists()

    second = await scene.matrix_squidd.again(config, "squidd-2.log")
    await react(alice, room, prompt.event.event_id, "✅")
    await alice.wait_for(
        lambda: len(alice.replies_to(scene.bot.user_id, asked)) >= 2, "the reply", timeout=60
    )
    scene.fake_llm.push("later reply")
    later = await alice.send(room, "later")
    await alice.wait_for(lambda: alice.replies_to(scene.bot.user_id, later), "reply to later")
    assert await second.stop() == 0

    assert marker.read_text() == "ran\n"
    bodies = [r.content["body"] for r in alice.replies_to(scene.bot.user_id, asked)]
    assert bodies[1:] == ["done"] and prompt_of(bodies[0]) == question
    assert len(scene.fake_llm.chat_requests) == 3  # the recorded answer was not asked for again
    records = AuditFile(scene.tmp_path / "data").records()
    assert [(r["decision"], r["by"]) for r in records] == [("approved", alice.user_id)]
    assert QuestionFiles(scene.tmp_path / "data").waiting_sync() == []
