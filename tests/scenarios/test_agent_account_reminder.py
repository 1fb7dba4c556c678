"""A reminder asked of an agent on its own Matrix account comes from that account, once,
across a restart, answered by that agent's model; the household's other bot is untouched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from squidd.store.cron_jobs import JobsFile
from tests.support.config import provider
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix import start_squidd
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import Chat, matrix_config

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

LEAD_S = 10  # see test_reminder.py: long enough for one turn and a restart


def user_text(request: dict[str, Any]) -> str:
    users = [m for m in request["messages"] if m.get("role") == "user"]
    return str(users[-1]["content"]) if users else ""


def _workspace(tmp: Path, name: str, soul: str) -> str:
    folder = tmp / f"{name}-ws"
    folder.mkdir()
    (folder / "SOUL.md").write_text(soul)
    return str(folder)


async def test_a_reminder_from_the_planners_own_account(scene: MatrixScene) -> None:
    """The household runs two assistants in one daemon: "home" on the bot account and
    "planner" on an account of its own. Alice asks the planner, in her DM with it, to remind
    her in a few seconds to call the plumber; the planner's model makes the job. The owner
    restarts the daemon. At the time, the reminder arrives in her DM with the planner, from
    the planner's account, once, written by the planner's model with the planner's SOUL.md;
    the home bot said nothing there and its model was never asked."""
    alice = await scene.make_human("alice")
    planner = scene.synapse.register(f"planner-{scene.tmp_path.name[-8:]}", password="pw-planner")
    scene.fake_llm.push("home should not be asked")
    with FakeLLM() as planners_model:
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
                    {"name": "home", "workspace": _workspace(scene.tmp_path, "home", "Home.")},
                    {
                        "name": "planner",
                        "workspace": _workspace(scene.tmp_path, "planner", "I plan."),
                        "chain": ["B/model-b"],
                        "matrix": {"user_id": planner.user_id, "password": "pw-planner"},
                    },
                ]
            },
        )
        first = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd-1.log")
        room = await alice.room_with(planner.user_id)
        chat = Chat(alice, planner.user_id, room)
        due = (datetime.now(UTC) + timedelta(seconds=LEAD_S)).replace(microsecond=0)
        local = due.replace(tzinfo=None).isoformat()
        add = {"name": "plumber", "prompt": "Remind Alice to call the plumber.", "at": local}
        planners_model.push(
            Reply(tool_calls=[("cron_add", add)]),
            "I will remind you.",
            "📞 Time to call the plumber!",
        )
        asked = await alice.send(room, "remind me in a moment to call the plumber")
        assert await chat.wait_reply(asked) == "I will remind you."
        [job] = JobsFile(scene.tmp_path / "data").load_sync()
        assert (job.agent, job.target) == ("planner", f"matrix-planner:{room}"), job
        assert await first.stop() == 0

        second = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd-2.log")
        await chat.wait_text("call the plumber!", timeout=LEAD_S + 60)
        assert await second.stop() == 0

    assert len(chat.containing("call the plumber!")) == 1
    assert alice.from_sender(scene.bot.user_id, room) == []
    assert scene.fake_llm.chat_requests == []
    cron_turns = [r for r in planners_model.chat_requests if "call the plumber." in user_text(r)]
    assert len(cron_turns) == 1
    assert "I plan." in cron_turns[0]["messages"][0]["content"]
    assert {r["model"] for r in planners_model.chat_requests} == {"model-b"}
