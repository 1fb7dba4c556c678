"""Two bot accounts of one daemon in one open room, whose homeserver is allowed (`squidd run`
on Synapse): each answers the person, never the other account. Without that, each answer is
a message from an allowed sender in an open room, and the two bots answer each other
forever."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.servers.synapse.server import SERVER_NAME, User
from tests.support.config import provider, write_daemon_config
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix_daemon import MatrixScene, bot_matrix_section, user_texts

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]


def _answer(request: dict[str, Any]) -> Reply:
    said = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return Reply(content=f"{request['model']} heard: {said}")


async def test_two_accounts_in_one_open_room_never_answer_each_other(
    scene: MatrixScene, make_user: Callable[[str], User]
) -> None:
    alice = await scene.make_human("alice")
    home, work = scene.bot, make_user("planner")
    room = await alice.create_room([home.user_id, work.user_id], name="both")
    for account in (home, work):
        scene.synapse.call(
            "POST", f"/_matrix/client/v3/join/{room}", {}, token=account.access_token
        )
    scene.fake_llm.responder = _answer
    with FakeLLM(responder=_answer) as second:
        matrix = bot_matrix_section(
            scene.synapse,
            home,
            [],
            allowed_servers=[SERVER_NAME],
            open_rooms=[room],
            timeline_limit=5,
            sync_timeout_s=5,
            reconnect_initial_delay_s=0.2,
            reconnect_max_delay_s=1.0,
            debounce_ms=0,
            **scene.synapse.bot_rate,
        )
        config: Path = write_daemon_config(
            scene.tmp_path,
            scene.fake_llm.base_url,
            api_key="sk-test-matrix-daemon-0001",
            matrix=matrix,
            llm={
                "providers": [provider("A", scene.fake_llm), provider("B", second)],
                "chain": ["A/model-a"],
                "max_retries": 0,
            },
            agents={
                "list": [
                    {"name": "home"},
                    {
                        "name": "work",
                        "chain": ["B/model-b"],
                        "matrix": {"user_id": work.user_id, "password": work.password},
                    },
                ]
            },
        )
        daemon = await scene.matrix_squidd.again(config, "squidd.log")
        for text in ("hello both", "and again"):
            event = await alice.send(room, text)
            for account in (home, work):
                await alice.wait_for(
                    lambda account=account, event=event: alice.replies_to(account.user_id, event),
                    f"{account.user_id}'s answer to {text}",
                )
        assert await daemon.stop() == 0
    # Each model heard alice's two messages only: no answer to the other account's answer
    # (it would have come before alice's second message, in the room's one queue).
    assert user_texts(scene.fake_llm) == ["hello both", "and again"]
    assert user_texts(second) == ["hello both", "and again"]
