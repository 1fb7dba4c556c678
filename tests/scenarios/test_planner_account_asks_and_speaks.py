"""Scenario o (tests/scenarios/README.md): an agent on a Matrix account of its own asks
before a command (answered by a reaction), streams and speaks its answer, and starts
anew on `/new`, all from its own account, through `squidd run` on Synapse."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.store.audit import AuditFile
from tests.support.config import provider
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix import Human, Seen, start_squidd
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import Chat, matrix_config, ran, react
from tests.support.speech_server import SpeechServer

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

BEFORE = "I will look at the calendar file first; that needs a shell command."
AFTER = "Your week: dentist on Tuesday, the plumber on Thursday. Nothing else is booked."
SHELL = Reply(content=BEFORE, tool_calls=[("shell", {"command": "echo ran >> ran.txt"})])


def notes(human: Human, sender: str, room: str) -> list[Seen]:
    return [s for s in human.from_sender(sender, room) if s.content.get("msgtype") == "m.audio"]


async def test_the_planner_asks_speaks_and_starts_anew_from_its_own_account(
    scene: MatrixScene,
) -> None:
    """The household runs "home" on the bot account and "planner" on an account of its
    own; only the planner asks before a shell command, and it always answers aloud. In her
    encrypted DM with the planner, Alice asks about her week. The planner's account asks
    before running the command; she puts ✅ on the question; the command runs once, the
    answer streams in and follows as a voice note, all from the planner's account. Then
    she sends `/new`: the planner says a new conversation started, without its model. The
    home bot and its model stay out of it; the audit log names the planner and Alice."""
    alice = await scene.make_human("alice")
    planner = scene.synapse.register(f"planner-{scene.tmp_path.name[-8:]}", password="pw-planner")
    scene.fake_llm.push("home should not be asked")
    (scene.tmp_path / "ws").mkdir(exist_ok=True)
    with FakeLLM() as planners_model, SpeechServer() as speech:
        planners_model.push(SHELL, AFTER)
        config = matrix_config(
            scene.tmp_path,
            scene.fake_llm.base_url,
            scene.synapse,
            scene.bot,
            [alice.user_id],
            matrix={"debounce_ms": 0, "stream_first_chars": 10},
            llm={
                "providers": [provider("A", scene.fake_llm), provider("B", planners_model)],
                "chain": ["A/model-a"],
                "max_retries": 0,
            },
            agents={
                "list": [
                    {"name": "home"},
                    {
                        "name": "planner",
                        "workspace": str(scene.tmp_path / "ws"),
                        "chain": ["B/model-b"],
                        "voice_reply": "always",
                        "matrix": {"user_id": planner.user_id, "password": "pw-planner"},
                        "approvals": {"tools": ["shell"]},
                    },
                ]
            },
            speech={"base_url": speech.base_url},
            **{"tools.approval": {"tools": [], "approvers": [alice.user_id]}},
        )
        daemon = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd.log")
        room = await alice.room_with(planner.user_id, encrypted=True)
        chat = Chat(alice, planner.user_id, room)
        asked = await alice.send(room, "what does my week look like?")
        await alice.wait_for(lambda: bool(chat.containing("Approval needed")), "the question", 60)
        prompt, _ = chat.question(asked)
        assert ran(scene.tmp_path) == 0
        await react(alice, room, prompt.event.event_id, "✅")
        await alice.wait_for(lambda: AFTER in chat.texts(), "the whole answer", 60)
        await alice.wait_for(lambda: len(notes(alice, planner.user_id, room)) == 1, "voice", 60)

        new = await alice.send(room, "/new")
        started = await chat.wait_reply(new)
        assert await daemon.stop() == 0

    assert ran(scene.tmp_path) == 1
    assert "new conversation" in started.lower(), started
    assert chat.texts().count(AFTER) == 1
    assert speech.texts == [AFTER]
    assert len(chat.containing("Approval needed")) == 1
    assert alice.from_sender(scene.bot.user_id, room) == []
    assert scene.fake_llm.chat_requests == []
    assert len(planners_model.chat_requests) == 2  # `/new` never reached the model
    records = AuditFile(Path(scene.tmp_path / "data")).records()
    assert [(r["decision"], r["by"], r.get("agent")) for r in records] == [
        ("approved", alice.user_id, "planner")
    ]
