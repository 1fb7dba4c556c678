"""A burst held while the Matrix channel restarts, through `squidd run` against Synapse.

Two messages come while the room's turn runs, so the burst stage holds them; then the
channel's receive loop restarts (the bot's access token is logged out: the channel logs in
again with its password, a new connection). The held messages are answered once the turn
ends, without a daemon restart, as one turn; each is acknowledged in the one sync ledger
the channel keeps across its connections, so after a daemon restart nothing is answered
again and the next message is answered as usual."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import pytest

from tests.channels.matrix.test_reactions import reactions
from tests.support.config import write_daemon_config
from tests.support.fake_llm import Reply
from tests.support.matrix_daemon import MatrixScene, bot_matrix_section

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]


def _users(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


async def test_a_held_burst_is_answered_after_the_channel_restarts(
    scene: MatrixScene,
) -> None:
    asked = threading.Event()
    release = threading.Event()

    def held_first(request: dict[str, Any]) -> Reply:
        if not asked.is_set():
            asked.set()
            release.wait(120)
        return Reply(content=f"answer to: {_users(request)[-1]}")

    scene.fake_llm.responder = held_first
    alice = await scene.make_human("alice")
    config = write_daemon_config(
        scene.tmp_path,
        scene.fake_llm.base_url,
        api_key="sk-test-matrix-burst-restart-1",
        gateway={
            "restart_initial_delay_s": 0.2,
            "restart_max_delay_s": 1.0,
            "delivery_retry_initial_s": 0.2,
            "delivery_retry_max_s": 1.0,
        },
        # debounce_ms at its default
        matrix=bot_matrix_section(scene.synapse, scene.bot, [alice.user_id], sync_timeout_s=2),
    )
    daemon = await scene.matrix_squidd.again(config, "squidd.log")
    room = await alice.room_with(scene.bot.user_id)
    try:
        first = await alice.send(room, "first")
        assert await anyio.to_thread.run_sync(asked.wait, 60), "the model was never asked"
        await alice.send(room, "second")
        third = await alice.send(room, "third")
        # Taken (👀), and held in the burst behind the running turn.
        await alice.wait_for(lambda: "👀" in reactions(alice, scene.bot.user_id, third), "👀", 60)
        token = json.loads((scene.tmp_path / "data" / "matrix" / "credentials.json").read_text())
        scene.synapse.call("POST", "/_matrix/client/v3/logout", {}, token=token["access_token"])
        await daemon.wait_event("matrix_connected", count=2)  # a new connection
    finally:
        release.set()
    await alice.wait_for(lambda: alice.replies_to(scene.bot.user_id, first), "the first answer", 60)
    await alice.wait_for(
        lambda: alice.replies_to(scene.bot.user_id, third), "the burst's answer", 60
    )
    assert [str(r.content["body"]) for r in alice.replies_to(scene.bot.user_id, third)] == [
        "answer to: second\n\nthird"
    ]
    assert len(scene.fake_llm.chat_requests) == 2
    assert daemon.count("daemon_ready") == 1  # no daemon restart

    # Every message settled: a restarted daemon answers none of them again.
    assert await daemon.stop() == 0
    again = await scene.matrix_squidd.again(config, "squidd.log")
    later = await alice.send(room, "fourth")
    await alice.wait_for(lambda: alice.replies_to(scene.bot.user_id, later), "the next answer", 60)
    assert len(scene.fake_llm.chat_requests) == 3
    assert _users(scene.fake_llm.chat_requests[-1])[-1] == "fourth"
    bodies = [str(s.content.get("body")) for s in alice.from_sender(scene.bot.user_id, room)]
    assert sorted(bodies) == sorted(
        ["answer to: first", "answer to: second\n\nthird", "answer to: fourth"]
    )
    assert await again.stop() == 0
