"""Where a Matrix message's chat command is read from: the text itself, or in a group room
the text after the bot's mention (`@bot /new`, `Squidd: /status`); against a real Synapse,
`@bot /new` in a three-member room is read as the command.

Through `squidd run` against the real Synapse: `/new` in a direct chat is answered without a
model call and the next turn's model request holds none of the earlier messages; `/stop`
cancels a turn whose model request is held, the person is told, and the next message is
answered as usual. Passed to the model instead, either command would be one more request
(`/new`) or would wait in line behind the held turn (`/stop`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from squidd.channels.matrix.policy import command_text
from squidd.gateway.conversations import STOPPED
from tests.servers.synapse.server import SynapseServer, User
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix import bot_settings
from tests.support.matrix_channel import run_channel
from tests.support.matrix_daemon import MatrixSquidd

MakeHuman = Callable[..., Any]

BOT = "@squidd:example.org"


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/new", "/new"),
        ("  /model big  ", "/model big"),
        ("@squidd:example.org /status", "/status"),
        ("Squidd: /stop", "/stop"),
        ("squidd, /help", "/help"),
        ("@Squidd /new", "/new"),
        ("Squidd what is /etc/hosts?", ""),
        ("hello Squidd /new", ""),
        ("Squiddy: /new", ""),
        ("", ""),
    ],
)
def test_command_after_the_mention(text: str, command: str) -> None:
    assert command_text(text, BOT, ["Squidd"]) == command


@pytest.mark.anyio
@pytest.mark.matrix
async def test_a_command_after_the_mention_in_a_group_room(
    synapse: SynapseServer, bot: User, make_human: MakeHuman, data_dir: Path
) -> None:
    alice = await make_human("alice")
    bob = await make_human("bob")
    settings = bot_settings(synapse, bot, allowed_users=[alice.user_id, bob.user_id])
    async with run_channel(settings, data_dir) as (_channel, inbox):
        room = await alice.create_room([bot.user_id, bob.user_id], name="three")
        await bob.join(room)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        by_mxid = await alice.send(room, f"{bot.user_id} /new")
        plain = await alice.send(room, "/new")  # no mention in a group room: not for the bot
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, by_mxid), "the answer")
    [message] = inbox.received
    assert message.source_id == by_mxid and message.command == "/new"
    assert plain not in [m.source_id for m in inbox.received]


def _bodies(human: Any, bot: str, event_id: str) -> list[str]:
    return [str(r.content["body"]) for r in human.replies_to(bot, event_id)]


async def _answered(human: Any, bot: str, event_id: str, what: str) -> None:
    await human.wait_for(lambda: bool(human.replies_to(bot, event_id)), what, 60)


@pytest.mark.anyio
@pytest.mark.matrix
@pytest.mark.slow
async def test_new_in_a_direct_chat_empties_the_window_of_the_next_turn(
    bot: User, make_human: MakeHuman, fake_llm: FakeLLM, matrix_squidd: MatrixSquidd
) -> None:
    alice = await make_human("alice")
    await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await alice.room_with(bot.user_id)
    for text in ("my pet is a walrus called Olaf", "she eats herring on Sundays"):
        sent = await alice.send(room, text)
        await _answered(alice, bot.user_id, sent, f"the answer to {text!r}")
    assert len(fake_llm.chat_requests) == 2
    assert "Olaf" in str(fake_llm.chat_requests[1]["messages"])  # the window had it
    new = await alice.send(room, "/new")
    await _answered(alice, bot.user_id, new, "the /new confirmation")
    assert len(fake_llm.chat_requests) == 2  # answered without a model call
    [confirmation] = _bodies(alice, bot.user_id, new)
    assert confirmation.startswith("Started a new conversation")
    asked = await alice.send(room, "what is my pet called?")
    await _answered(alice, bot.user_id, asked, "the answer after /new")
    assert _bodies(alice, bot.user_id, asked) == ["echo: what is my pet called?"]
    assert len(fake_llm.chat_requests) == 3
    seen = str(fake_llm.chat_requests[-1]["messages"])
    assert "what is my pet called?" in seen
    for earlier in ("Olaf", "herring", "echo: my pet"):
        assert earlier not in seen
    users = [m["content"] for m in fake_llm.chat_requests[-1]["messages"] if m["role"] == "user"]
    assert "/new" not in users


@pytest.mark.anyio
@pytest.mark.matrix
@pytest.mark.slow
async def test_stop_cancels_a_slow_turn_and_the_next_message_is_answered(
    bot: User, make_human: MakeHuman, fake_llm: FakeLLM, matrix_squidd: MatrixSquidd
) -> None:
    asked = threading.Event()
    release = threading.Event()

    def slow_first(request: dict[str, Any]) -> Reply:
        if not asked.is_set():
            asked.set()
            release.wait(90)  # the model takes its time: long after the /stop
            return Reply(content="too late")
        return Reply(content="after the stop")

    fake_llm.responder = slow_first
    alice = await make_human("alice")
    await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await alice.room_with(bot.user_id)
    try:
        essay = await alice.send(room, "write me a very long essay")
        assert await anyio.to_thread.run_sync(asked.wait, 60), "the model was never asked"
        stop = await alice.send(room, "/stop")
        # The held request is still unanswered: only the cancel can answer these.
        await _answered(alice, bot.user_id, stop, "the /stop answer")
        await _answered(alice, bot.user_id, essay, "the stopped turn's notice")
    finally:
        release.set()  # the abandoned request's reply now goes nowhere
    after = await alice.send(room, "and now?")
    await _answered(alice, bot.user_id, after, "the answer after the stop")
    await alice.sync()
    assert _bodies(alice, bot.user_id, essay) == [STOPPED]
    assert _bodies(alice, bot.user_id, stop) == ["Stopped the turn that was running."]
    assert _bodies(alice, bot.user_id, after) == ["after the stop"]
    bodies = [str(s.content.get("body")) for s in alice.from_sender(bot.user_id, room)]
    assert not [b for b in bodies if "too late" in b]
    requests = fake_llm.chat_requests
    assert len(requests) == 2  # the held one and "and now?": /stop never reached the model
    seen = str(requests[-1]["messages"])
    assert "write me a very long essay" in seen and "cancelled the work" in seen
    assert "too late" not in seen
    users = [m["content"] for m in requests[-1]["messages"] if m["role"] == "user"]
    assert "/stop" not in users
