"""Where a Matrix message's chat command is read from: the text itself, or in a group room
the text after the bot's mention (`@bot /new`, `Squidd: /status`); against a real Synapse,
`@bot /new` in a three-member room is read as the command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squidd.channels.matrix.policy import command_text
from tests.channels.matrix.conftest import bot_settings, run_channel
from tests.servers.synapse.server import SynapseServer, User

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
