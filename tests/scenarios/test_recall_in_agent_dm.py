"""Scenario p (tests/scenarios/README.md): hybrid recall in the DM of an agent on a Matrix
account of its own finds what she told that agent before `/new`, in other words, and
nothing she told the other agent, through `squidd run` on Synapse."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.config import provider
from tests.support.daemon import DaemonProcess
from tests.support.fake_embeddings import EmbeddingsServer
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix import start_squidd
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import Chat, matrix_config

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

FACT = "By the way, I am allergic to peanuts, please remember that."
CANARY = "CANARY-HOME my sister has a peanut allergy too"
QUERY = "groundnut intolerance"  # no word of FACT


def tool_results(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"] if m["role"] == "tool")


async def indexed(daemon: DaemonProcess, emb: EmbeddingsServer, agent: str, text: str) -> None:
    """Until `text` was embedded and agent's indexer committed a pass after it (its log
    lines carry the supervised child's name, `recall:<agent>`)."""

    def done() -> bool:
        if text not in emb.inputs:
            return False
        child = f"recall:{agent}"
        rows = [e for e in daemon.events() if e.get("event") == "recall_indexed"]
        return any(e.get("child") == child for e in rows)

    await daemon.wait_until(done, f"{agent}'s index holding {text!r}", 60)


async def test_recall_in_the_planners_own_dm_stays_the_planners(scene: MatrixScene) -> None:
    """Alice tells the home bot, in her DM with it, about her sister's peanut allergy, and
    the planner, in her encrypted DM with the planner's own account, that she is allergic to
    peanuts. She starts a new conversation with the planner (`/new`) and asks whether she
    has a groundnut intolerance: the planner's model uses `recall`, which finds her words
    from before `/new` though no word is the same, and nothing she told the home bot; the
    answer comes from the planner's account."""
    alice = await scene.make_human("alice")
    planner = scene.synapse.register(f"planner-{scene.tmp_path.name[-8:]}", password="pw-planner")
    scene.fake_llm.push("Noted, home.")
    with FakeLLM() as planners_model, EmbeddingsServer() as emb:
        planners_model.push(
            "Noted.",
            Reply(tool_calls=[("recall", {"query": QUERY})]),
            "Yes: you told me you are allergic to peanuts.",
        )
        config = matrix_config(
            scene.tmp_path,
            scene.fake_llm.base_url,
            scene.synapse,
            scene.bot,
            [alice.user_id],
            matrix={"debounce_ms": 0},
            llm={
                "providers": [
                    provider("A", scene.fake_llm),
                    provider("B", planners_model),
                    provider("emb", emb),
                ],
                "chain": ["A/model-a"],
                "max_retries": 0,
            },
            agents={
                "list": [
                    {"name": "home"},
                    {
                        "name": "planner",
                        "chain": ["B/model-b"],
                        "matrix": {"user_id": planner.user_id, "password": "pw-planner"},
                    },
                ]
            },
            **{"memory.recall": {"embeddings": f"emb/{emb.model}", "every_s": 0.2}},
        )
        daemon = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd.log")
        home_room = await alice.room_with(scene.bot.user_id)
        home = Chat(alice, scene.bot.user_id, home_room)
        told_home = await alice.send(home_room, CANARY)
        assert await home.wait_reply(told_home) == "Noted, home."
        await indexed(daemon, emb, "home", CANARY)

        room = await alice.room_with(planner.user_id, encrypted=True)
        chat = Chat(alice, planner.user_id, room)
        told = await alice.send(room, FACT)
        assert await chat.wait_reply(told) == "Noted."
        await indexed(daemon, emb, "planner", FACT)
        new = await alice.send(room, "/new")
        await chat.wait_reply(new)
        asked = await alice.send(room, "Do I have a groundnut intolerance?")
        answer = await chat.wait_reply(asked)
        assert await daemon.stop() == 0

    assert answer == "Yes: you told me you are allergic to peanuts."
    _, recalled, _ = planners_model.chat_requests
    assert FACT not in str(recalled["messages"][:-1])  # out of view after /new ...
    found = tool_results(planners_model.chat_requests[2])
    assert "allergic to peanuts" in found  # ... but recalled
    assert "CANARY-HOME" not in found  # never the other agent's
    assert len(scene.fake_llm.chat_requests) == 1
    assert alice.from_sender(scene.bot.user_id, room) == []
