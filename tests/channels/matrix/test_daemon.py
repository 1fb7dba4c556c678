"""`squidd run` as a real process with the Matrix channel, a real Synapse and the scripted
LLM: messages sent while the daemon is down, a crash in the middle of a turn, and a
homeserver restart in the middle of a conversation. Each message is answered exactly once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.servers.synapse.server import SynapseServer, User
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix import wait_until
from tests.support.matrix_daemon import MatrixScene, MatrixSquidd, matrix_daemon_config, user_texts

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

MakeHuman = Callable[..., Any]


async def test_daemon_down_while_five_messages_are_sent(
    scene: MatrixScene,
) -> None:
    alice = await scene.make_human("alice")
    room = await alice.create_room([scene.bot.user_id], direct=True)
    scene.synapse.call("POST", f"/_matrix/client/v3/join/{room}", {}, token=scene.bot.access_token)
    old = [await alice.send(room, f"old {i}") for i in range(3)]
    config = matrix_daemon_config(
        scene.tmp_path, scene.fake_llm, scene.synapse, scene.bot, alice.user_id
    )

    first = await scene.matrix_squidd.again(config, "squidd-1.log")
    hello = await alice.send(room, "hello")
    await alice.wait_for(lambda: alice.replies_to(scene.bot.user_id, hello), "reply to hello")
    assert await first.stop() == 0

    missed = [await alice.send(room, f"missed {i}") for i in range(5)]
    second = scene.matrix_squidd.spawn(config, "squidd-2.log")
    await alice.wait_for(
        lambda: all(alice.replies_to(scene.bot.user_id, e) for e in missed),
        "five replies",
        timeout=60,
    )
    sentinel = await alice.send(room, "sentinel")
    await alice.wait_for(lambda: alice.replies_to(scene.bot.user_id, sentinel), "sentinel reply")
    assert await second.stop() == 0

    for i, event_id in enumerate(missed):
        assert [r.content["body"] for r in alice.replies_to(scene.bot.user_id, event_id)] == [
            f"echo: missed {i}"
        ]
    assert all(not alice.replies_to(scene.bot.user_id, e) for e in old)
    assert len(alice.replies_to(scene.bot.user_id, hello)) == 1
    assert sorted(user_texts(scene.fake_llm)) == sorted(
        ["hello", *[f"missed {i}" for i in range(5)], "sentinel"]
    )
    assert second.count("matrix_backfilled") >= 1


async def test_crash_mid_turn_is_answered_once_after_restart(
    bot: User,
    make_human: MakeHuman,
    tmp_path: Path,
    fake_llm: FakeLLM,
    matrix_squidd: MatrixSquidd,
) -> None:
    alice = await make_human("alice")
    config, first = await matrix_squidd.start(alice.user_id, "squidd-1.log")
    room = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")

    fake_llm.push(Reply(content="never delivered", delay=30))
    asked = await alice.send(room, "answer me once")
    await wait_until(lambda: len(fake_llm.chat_requests) == 1, "the turn started")
    await first.stop(signal.SIGKILL)

    second = matrix_squidd.spawn(config, "squidd-2.log")
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, asked), "reply after restart")
    later = await alice.send(room, "later")
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, later), "reply to later")
    assert await second.stop() == 0
    assert [r.content["body"] for r in alice.replies_to(bot.user_id, asked)] == [
        "echo: answer me once"
    ]


async def test_homeserver_restart_mid_conversation(
    synapse: SynapseServer,
    bot: User,
    make_human: MakeHuman,
    fake_llm: FakeLLM,
    matrix_squidd: MatrixSquidd,
) -> None:
    alice = await make_human("alice")
    _, daemon = await matrix_squidd.start(alice.user_id, "squidd-1.log")
    room = await alice.room_with(bot.user_id, encrypted=True)
    q1 = await alice.send(room, "question one")
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, q1), "first reply")

    # The homeserver goes away while the agent is working on question two.
    fake_llm.push(Reply(content="answer across the restart", delay=1.0))
    q2 = await alice.send(room, "question two")
    await wait_until(lambda: len(fake_llm.chat_requests) == 2, "the turn started")
    await anyio.to_thread.run_sync(synapse.stop)
    await daemon.wait_event("reply_delivery_failed")
    await anyio.to_thread.run_sync(synapse.start)

    await alice.wait_for(lambda: alice.replies_to(bot.user_id, q2), "reply after the restart")
    q3 = await alice.send(room, "question three")
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, q3), "third reply")
    await daemon.wait_event("matrix_reconnected")
    assert await daemon.stop() == 0

    bodies = [[r.content["body"] for r in alice.replies_to(bot.user_id, q)] for q in (q1, q2, q3)]
    assert bodies == [
        ["echo: question one"],
        ["answer across the restart"],
        ["echo: question three"],
    ]
    assert all(r.event.decrypted for q in (q1, q2, q3) for r in alice.replies_to(bot.user_id, q))


async def test_revoked_token_fails_the_channel_not_the_daemon(
    synapse: SynapseServer,
    bot: User,
    tmp_path: Path,
    fake_llm: FakeLLM,
    matrix_squidd: MatrixSquidd,
) -> None:
    login = synapse.call(
        "POST",
        "/_matrix/client/v3/login",
        {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": bot.localpart},
            "password": bot.password,
        },
    )
    token = login["access_token"]
    config = matrix_daemon_config(tmp_path, fake_llm, synapse, bot, bot.user_id, token=token)
    daemon = await matrix_squidd.again(config, "squidd-1.log")
    synapse.call("POST", "/_matrix/client/v3/logout", {}, token=token)
    await daemon.wait_event("child_failed_permanently")

    status = await anyio.to_thread.run_sync(
        lambda: subprocess.run(
            [sys.executable, "-m", "squidd", "--config", str(config), "status"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    )
    assert status.returncode == 0, status.stderr
    [line] = [row for row in status.stdout.splitlines() if row.strip().startswith("matrix")]
    assert "failed" in line
    assert "M_UNKNOWN_TOKEN" in line
    assert token not in status.stdout + daemon.log_text()
    assert daemon.proc.poll() is None  # the daemon keeps running
    assert await daemon.stop() == 0


async def test_a_lone_surrogate_in_an_encrypted_message_is_answered_and_kept(
    bot: User, make_human: MakeHuman, tmp_path: Path, fake_llm: FakeLLM, matrix_squidd: MatrixSquidd
) -> None:
    """The homeserver cannot check an encrypted body: a lone surrogate, a NUL and control
    characters in it reach the bot. The turn runs (no crash apology), the model gets valid
    text, the history keeps the message, and every line the daemon logs (nio's included)
    is one JSON object."""
    alice = await make_human("alice")
    _, daemon = await matrix_squidd.start(alice.user_id, "squidd-1.log")
    room = await alice.room_with(bot.user_id, encrypted=True)
    odd = await alice.send(room, "odd \ud800 te\x00xt\x1b[2J\x07")
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, odd), "reply")
    assert await daemon.stop() == 0

    assert [r.content["body"] for r in alice.replies_to(bot.user_id, odd)] == [
        "echo: odd \ufffd text[2J"
    ]
    assert user_texts(fake_llm) == ["odd \ufffd text[2J"]
    [history] = (tmp_path / "data" / "sessions").glob("*.jsonl")
    users = [
        json.loads(line)["content"]
        for line in history.read_text(encoding="utf-8").splitlines()
        if json.loads(line)["role"] == "user"
    ]
    assert users == ["odd \ufffd text[2J"]
    for line in daemon.log_text().splitlines():
        assert isinstance(json.loads(line), dict), line
