"""Two agents on one Matrix account, told apart by room (`squidd run` on Synapse): the
room the work agent lists is answered from its SOUL.md and model, every other room by the
default agent; each message once; a restart keeps the routes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.config import provider
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix_daemon import MatrixScene, matrix_daemon_config

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]


def _answer(request: dict[str, Any]) -> Reply:
    system = request["messages"][0]["content"]
    soul = "work" if "I do the work." in system else "home" if "I keep the home." in system else "?"
    said = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return Reply(content=f"{soul}/{request['model']}: {said}")


async def test_rooms_route_to_their_agents(scene: MatrixScene) -> None:
    alice = await scene.make_human("alice")
    bot = scene.bot.user_id
    home_room = await alice.create_room([bot], direct=True)
    work_room = await alice.create_room([bot], direct=True, name="work")
    for room in (home_room, work_room):
        scene.synapse.call(
            "POST", f"/_matrix/client/v3/join/{room}", {}, token=scene.bot.access_token
        )
    workspaces = {}
    for name, soul in (("home", "I keep the home."), ("work", "I do the work.")):
        folder = scene.tmp_path / f"{name}-ws"
        folder.mkdir()
        (folder / "SOUL.md").write_text(soul)
        workspaces[name] = str(folder)
    scene.fake_llm.responder = _answer
    with FakeLLM(responder=_answer) as second:
        config: Path = matrix_daemon_config(
            scene.tmp_path,
            scene.fake_llm,
            scene.synapse,
            scene.bot,
            alice.user_id,
            llm={
                "providers": [provider("A", scene.fake_llm), provider("B", second)],
                "chain": ["A/model-a"],
                "max_retries": 0,
            },
            agents={
                "list": [
                    {"name": "home", "workspace": workspaces["home"]},
                    {
                        "name": "work",
                        "workspace": workspaces["work"],
                        "chain": ["B/model-b"],
                        "rooms": [work_room],
                    },
                ]
            },
        )
        first = await scene.matrix_squidd.again(config, "squidd-1.log")

        async def ask(room: str, text: str) -> str:
            event = await alice.send(room, text)
            await alice.wait_for(lambda: alice.replies_to(bot, event), f"the answer to {text}")
            [reply] = alice.replies_to(bot, event)
            return str(reply.content["body"])

        assert await ask(home_room, "lights") == "home/model-a: lights"
        assert await ask(work_room, "report") == "work/model-b: report"
        assert await first.stop() == 0
        second_run = await scene.matrix_squidd.again(config, "squidd-2.log")
        assert await ask(work_room, "again") == "work/model-b: again"
        assert await ask(home_room, "door") == "home/model-a: door"
        assert await second_run.stop() == 0
    assert len(second.chat_requests) == 2
    assert len(scene.fake_llm.chat_requests) == 2
