"""Scenario q (tests/scenarios/README.md): an agent's own heartbeat, on while the daemon's
`[heartbeat]` is off, delivered through the agent's own Matrix account, written and never
spoken, through `squidd run` on Synapse."""

from __future__ import annotations

import pytest

from tests.support.config import provider
from tests.support.daemon import run_squidd
from tests.support.fake_llm import FakeLLM
from tests.support.matrix import start_squidd
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import Chat, matrix_config
from tests.support.speech_server import SpeechServer

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

NEWS = "Reminder from your checklist: the passport expires next month."
BEAT_S = 60  # interval_minutes = 1, the shortest there is


async def test_the_planners_heartbeat_comes_from_its_own_account(scene: MatrixScene) -> None:
    """Only the planner beats: its HEARTBEAT.md has an open item, its target is Alice's DM
    with the planner's own account (`matrix-planner:<room>`). `squidd status` shows the
    planner's next beat though `[heartbeat]` is off. After a minute the checklist's news
    arrives in that DM from the planner's account, once, written only (the planner answers
    aloud, but never on a heartbeat); the home bot and its model say nothing."""
    alice = await scene.make_human("alice")
    planner = scene.synapse.register(f"planner-{scene.tmp_path.name[-8:]}", password="pw-planner")
    workspace = scene.tmp_path / "planner-ws"
    workspace.mkdir()
    (workspace / "HEARTBEAT.md").write_text("- [ ] check the passport's expiry date\n")
    room = await alice.create_room([planner.user_id], encrypted=True, direct=True)
    chat = Chat(alice, planner.user_id, room)
    with FakeLLM() as planners_model, SpeechServer() as speech:
        planners_model.push(NEWS)
        config = matrix_config(
            scene.tmp_path,
            scene.fake_llm.base_url,
            scene.synapse,
            scene.bot,
            [alice.user_id],
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
                        "workspace": str(workspace),
                        "chain": ["B/model-b"],
                        "voice_reply": "always",
                        "matrix": {"user_id": planner.user_id, "password": "pw-planner"},
                        "heartbeat": {
                            "enabled": True,
                            "interval_minutes": 1,
                            "active_hours": "00:00-24:00",
                            "target": f"matrix-planner:{room}",
                        },
                    },
                ]
            },
            speech={"base_url": speech.base_url},
        )
        daemon = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd.log")
        await alice.wait_for(lambda: alice.membership(room, planner.user_id) == "join", "joins")
        status = run_squidd(config, "status")
        await chat.wait_text("passport expires", timeout=BEAT_S + 60)
        await daemon.wait_event("reply_sent")
        assert await daemon.stop() == 0

    assert "heartbeat: off" in status.stdout  # the default agent's
    assert "heartbeat (planner): next " in status.stdout, status.stdout
    assert chat.texts() == [NEWS]
    assert speech.heard == []  # a heartbeat is never spoken
    assert alice.from_sender(scene.bot.user_id, room) == []
    assert scene.fake_llm.chat_requests == []
    [beat] = planners_model.chat_requests
    assert "passport" in str(beat["messages"])
