"""The Matrix channel against a real Synapse: direct chats, invites, the mention policy,
encrypted rooms, rendering, threads and the typing notice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from squidd.core.models import Inbound
from tests.servers.synapse.server import SynapseServer, User
from tests.support.matrix import bot_settings
from tests.support.matrix_channel import AliceAllowed, run_channel

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


async def dm_with_bot(human: Any, bot: User) -> str:
    """A direct chat the bot has joined (the channel must be running)."""
    room = await human.create_room([bot.user_id], direct=True)
    await human.wait_for(lambda: human.membership(room, bot.user_id) == "join", "bot joins")
    return room


async def test_dm_round_trip(bot: User, data_dir: Path, alice_allowed: AliceAllowed) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir) as (_channel, inbox):
        room = await dm_with_bot(alice, bot)
        sent = await alice.send(room, "hello there")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sent), "the reply")

    reply = alice.replies_to(bot.user_id, sent)
    assert [r.content["body"] for r in reply] == ["echo: hello there"]
    [inbound] = inbox.received
    assert inbound.channel == "matrix"
    assert inbound.source_id == sent
    assert inbound.session_id == room
    assert inbound.sender == alice.user_id
    assert inbound.reply_to is not None
    assert inbound.reply_to.target == room
    # A password login is kept in the data dir (owner-only), with the sync position.
    creds = data_dir / "matrix" / "credentials.json"
    assert creds.stat().st_mode & 0o777 == 0o600
    assert (data_dir / "matrix" / "sync.json").exists()


async def test_invites_accepted_only_from_allowed_users(
    synapse: SynapseServer, bot: User, make_human: MakeHuman, data_dir: Path
) -> None:
    alice = await make_human("alice")
    mallory = await make_human("mallory")
    settings = bot_settings(synapse, bot, allowed_users=[alice.user_id])
    async with run_channel(settings, data_dir):
        bad_room = await mallory.create_room([bot.user_id], direct=True)
        good_room = await alice.create_room([bot.user_id], direct=True)
        await alice.wait_for(
            lambda: alice.membership(good_room, bot.user_id) == "join", "bot joins alice's room"
        )
        await mallory.wait_for(
            lambda: mallory.membership(bad_room, bot.user_id) == "leave",
            "bot declines mallory's invite",
        )
        # Mallory cannot talk to the bot in alice's room either.
        await alice.client.room_invite(good_room, mallory.user_id)
        await mallory.join(good_room)
        ignored = await mallory.send(good_room, f"{bot.user_id} please answer me")
        sentinel = await alice.send(good_room, f"{bot.user_id} ping")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sentinel), "reply to alice")
        # Kicked and invited again: the new invite is accepted too.
        await alice.client.room_kick(good_room, bot.user_id)
        await alice.wait_for(lambda: alice.membership(good_room, bot.user_id) == "leave", "kick")
        await alice.client.room_invite(good_room, bot.user_id)
        await alice.wait_for(
            lambda: alice.membership(good_room, bot.user_id) == "join", "bot joins again"
        )
    assert not alice.replies_to(bot.user_id, ignored)


async def test_mention_policy_in_a_three_member_room(
    synapse: SynapseServer, bot: User, make_human: MakeHuman, data_dir: Path
) -> None:
    alice = await make_human("alice")
    bob = await make_human("bob")
    synapse.call(
        "PUT",
        f"/_matrix/client/v3/profile/{bot.user_id}/displayname",
        {"displayname": "Squiddy Bot"},
        token=bot.access_token,
    )
    settings = bot_settings(synapse, bot, allowed_users=[alice.user_id, bob.user_id])
    async with run_channel(settings, data_dir) as (_channel, inbox):
        room = await alice.create_room([bot.user_id, bob.user_id], name="three")
        await bob.join(room)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        plain = await alice.send(room, "just chatting with bob")
        pill = await alice.send(
            room, "what is the time?", **{"m.mentions": {"user_ids": [bot.user_id]}}
        )
        by_name = await bob.send(room, "hey squiddy bot, hello")
        by_mxid = await bob.send(room, f"{bot.user_id}: status?")
        await alice.wait_for(
            lambda: all(alice.replies_to(bot.user_id, e) for e in (pill, by_name, by_mxid)),
            "replies to the three mentions",
        )
    assert not alice.replies_to(bot.user_id, plain)
    assert plain not in [m.source_id for m in inbox.received]


async def test_open_room_is_answered_without_mention(
    synapse: SynapseServer, bot: User, make_human: MakeHuman, data_dir: Path
) -> None:
    alice = await make_human("alice")
    bob = await make_human("bob")
    room = await alice.create_room([bot.user_id, bob.user_id], name="open")
    await bob.join(room)
    settings = bot_settings(synapse, bot, allowed_users=[alice.user_id], open_rooms=[room])
    async with run_channel(settings, data_dir):
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        sent = await alice.send(room, "no mention here")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sent), "reply")


async def test_encrypted_room_round_trip(
    bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir) as (_channel, inbox):
        room = await alice.create_room([bot.user_id], encrypted=True, direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        await alice.sync()  # learn the bot's device keys
        sent = await alice.send(room, "a secret question")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sent), "decrypted reply")
    [reply] = alice.replies_to(bot.user_id, sent)
    assert reply.content["body"] == "echo: a secret question"
    assert reply.event.decrypted is True  # it travelled encrypted
    assert inbox.received[0].text == "a secret question"  # and arrived decrypted


async def test_markdown_is_rendered_to_sanitised_html(
    bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed

    def answer(message: Inbound) -> str:
        return "**bold** and `code`\n\n- one\n- two\n\n<script>alert(1)</script>"

    async with run_channel(settings, data_dir, answer):
        room = await dm_with_bot(alice, bot)
        sent = await alice.send(room, "format something")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sent), "reply")
    [reply] = alice.replies_to(bot.user_id, sent)
    content = reply.content
    assert content["format"] == "org.matrix.custom.html"
    html = content["formatted_body"]
    assert "<strong>bold</strong>" in html
    assert "<code>code</code>" in html
    assert "<li>one</li>" in html
    assert "<script>" not in html
    assert content["body"].startswith("**bold**")


async def test_reply_in_a_thread_stays_in_the_thread(
    bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir):
        room = await dm_with_bot(alice, bot)
        root = await alice.send(room, "thread root")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, root), "reply to the root")
        in_thread = await alice.send(
            room,
            "inside the thread",
            **{
                "m.relates_to": {
                    "rel_type": "m.thread",
                    "event_id": root,
                    "is_falling_back": True,
                    "m.in_reply_to": {"event_id": root},
                }
            },
        )
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, in_thread), "thread reply")
    [reply] = alice.replies_to(bot.user_id, in_thread)
    relation = reply.content["m.relates_to"]
    assert relation["rel_type"] == "m.thread"
    assert relation["event_id"] == root


async def test_typing_notice_while_the_agent_works(
    bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir) as (_channel, inbox):
        room = await dm_with_bot(alice, bot)
        inbox.gate = anyio.Event()  # the "agent" works until the test lets it finish

        def bot_typing() -> bool:
            states = alice.typing.get(room, [])
            return bool(states) and bot.user_id in states[-1]

        sent = await alice.send(room, "think hard")
        await alice.wait_for(bot_typing, "the bot typing")
        inbox.gate.set()
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sent), "reply")
        await alice.wait_for(lambda: not bot_typing(), "typing cleared")
