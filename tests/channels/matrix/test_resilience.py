"""Restarts, gaps and failures: what the channel answers after being down, how it rides out a
homeserver restart, and how it reports credentials the homeserver no longer accepts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from squidd.channels.matrix import MatrixChannel
from squidd.core.ports import ChannelState
from squidd.errors import PermanentError
from tests.servers.synapse.server import SynapseServer, User
from tests.support.matrix import bot_settings, wait_until
from tests.support.matrix_channel import AliceAllowed, AnsweringInbox, echo, run_channel

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


async def test_down_time_messages_answered_once_and_old_history_never(
    synapse: SynapseServer, bot: User, make_human: MakeHuman, data_dir: Path
) -> None:
    alice = await make_human("alice")
    # History from before squidd ever ran: the bot account is already in the room.
    room = await alice.create_room([bot.user_id], direct=True)
    synapse.call("POST", f"/_matrix/client/v3/join/{room}", {}, token=bot.access_token)
    old = [await alice.send(room, f"old {i}") for i in range(3)]
    # A tiny timeline limit makes the down-time gap `limited`: it must be back-filled.
    settings = bot_settings(synapse, bot, allowed_users=[alice.user_id], timeline_limit=2)

    async with run_channel(settings, data_dir) as (_channel, inbox):
        first = await alice.send(room, "after the first start")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, first), "first reply")
        await inbox.all_acked()
    assert inbox.texts() == ["after the first start"]

    missed = [await alice.send(room, f"missed {i}") for i in range(5)]
    async with run_channel(settings, data_dir) as (_channel, inbox):
        await alice.wait_for(
            lambda: all(alice.replies_to(bot.user_id, e) for e in missed), "five replies"
        )
        sentinel = await alice.send(room, "sentinel")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sentinel), "sentinel reply")
    assert inbox.texts() == [f"missed {i}" for i in range(5)] + ["sentinel"]
    for event_id in missed:
        assert len(alice.replies_to(bot.user_id, event_id)) == 1
    for event_id in old:
        assert not alice.replies_to(bot.user_id, event_id)


async def test_unacknowledged_message_is_delivered_again_after_a_crash(
    bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir) as (_channel, inbox):
        room = await alice.create_room([bot.user_id], direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        inbox.gate = anyio.Event()  # the turn never finishes: the daemon dies mid-turn
        interrupted = await alice.send(room, "interrupted")
        await wait_until(lambda: inbox.texts() == ["interrupted"], "the message delivered")
        later = await alice.send(room, "sent during the turn")
        await wait_until(lambda: len(inbox.received) == 2, "the second message delivered")
    assert not alice.replies_to(bot.user_id, interrupted)

    async with run_channel(settings, data_dir) as (_channel, inbox):
        await alice.wait_for(
            lambda: bool(
                alice.replies_to(bot.user_id, interrupted) and alice.replies_to(bot.user_id, later)
            ),
            "both answered after the restart",
        )
    assert inbox.texts() == ["interrupted", "sent during the turn"]


async def test_homeserver_restart_mid_conversation(
    synapse: SynapseServer, bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir) as (_channel, inbox):
        room = await alice.create_room([bot.user_id], direct=True)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        before = await alice.send(room, "before the restart")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, before), "first reply")

        await anyio.to_thread.run_sync(synapse.restart)

        after = await alice.send(room, "after the restart")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, after), "reply after restart")
        await wait_until(lambda: inbox.states[-1][0] == ChannelState.CONNECTED, "connected again")
    states = [state for state, _detail in inbox.states]
    assert ChannelState.RECONNECTING in states
    assert inbox.texts() == ["before the restart", "after the restart"]


def _login_token(synapse: SynapseServer, user: User) -> str:
    result = synapse.call(
        "POST",
        "/_matrix/client/v3/login",
        {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": user.localpart},
            "password": user.password,
            "device_id": "SQUIDDTEST",
        },
    )
    token: str = result["access_token"]
    return token


async def test_revoked_token_is_a_permanent_failure(
    synapse: SynapseServer, bot: User, data_dir: Path
) -> None:
    token = _login_token(synapse, bot)
    settings = bot_settings(synapse, bot, password=None, access_token=token)
    channel = MatrixChannel(settings, data_dir)
    with pytest.RaisesGroup(PermanentError, flatten_subgroups=True):
        async with anyio.create_task_group() as tg:
            inbox = AnsweringInbox(channel, tg, echo)
            await tg.start(channel.run, inbox)
            synapse.call("POST", "/_matrix/client/v3/logout", {}, token=token)
            await anyio.sleep_forever()  # run() ends by itself, with the error
    state, detail = inbox.states[-1]
    assert state == ChannelState.FAILED
    assert "M_UNKNOWN_TOKEN" in detail
    assert token not in detail


async def test_rejected_token_at_start_fails_before_receiving(
    synapse: SynapseServer, bot: User, data_dir: Path
) -> None:
    settings = bot_settings(synapse, bot, password=None, access_token="syt_not_a_real_token")
    channel = MatrixChannel(settings, data_dir)
    with pytest.RaisesGroup(PermanentError, flatten_subgroups=True):
        async with anyio.create_task_group() as tg:
            inbox = AnsweringInbox(channel, tg, echo)
            await tg.start(channel.run, inbox)
    assert inbox.states[-1][0] == ChannelState.FAILED


async def test_wrong_password_is_permanent(
    synapse: SynapseServer, bot: User, data_dir: Path
) -> None:
    settings = bot_settings(synapse, bot, password="not-the-password")
    channel = MatrixChannel(settings, data_dir)
    with pytest.RaisesGroup(PermanentError, flatten_subgroups=True):
        async with anyio.create_task_group() as tg:
            await tg.start(channel.run, AnsweringInbox(channel, tg, echo))


async def test_password_login_is_kept_and_reused(
    synapse: SynapseServer, bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    creds_file = data_dir / "matrix" / "credentials.json"
    async with run_channel(settings, data_dir):
        pass
    first = json.loads(creds_file.read_text())
    async with run_channel(settings, data_dir):
        room = await alice.room_with(bot.user_id, encrypted=True)
        sent = await alice.send(room, "same device?")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sent), "reply")
    second = json.loads(creds_file.read_text())
    assert first["device_id"] == second["device_id"]
    devices = synapse.call("GET", "/_matrix/client/v3/devices", token=first["access_token"])
    squidd_devices = [d for d in devices["devices"] if d.get("display_name") == "squidd"]
    assert len(squidd_devices) == 1
