"""Threads as sessions, against a real Synapse: a thread's messages form their own session
(the room's main timeline another), the first one carries the thread root's text for the
model, and the reply stays in the thread. `auto` keeps a direct chat one session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squidd.channels.matrix.policy import Policy
from tests.servers.synapse.server import SynapseServer, User
from tests.support.matrix import bot_settings
from tests.support.matrix_channel import run_channel

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


def in_thread(root: str) -> dict[str, Any]:
    return {
        "m.relates_to": {
            "rel_type": "m.thread",
            "event_id": root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": root},
        }
    }


async def test_a_thread_is_its_own_session_and_sees_its_root_once(
    synapse: SynapseServer, bot: User, make_human: MakeHuman, data_dir: Path
) -> None:
    alice = await make_human("alice")
    settings = bot_settings(synapse, bot, allowed_users=[alice.user_id], session_scope="thread")
    async with run_channel(settings, data_dir) as (_channel, inbox):
        room = await alice.room_with(bot.user_id)
        root = await alice.send(room, "Plan the trip to Oslo in May")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, root), "the root's reply")
        first = await alice.send(room, "what about hotels?", **in_thread(root))
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, first), "thread reply 1")
        second = await alice.send(room, "and trains?", **in_thread(root))
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, second), "thread reply 2")
        main = await alice.send(room, "unrelated: what time is it?")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, main), "main reply")

    sessions = [m.session_id for m in inbox.received]
    thread = f"{room}/thread/{root}"
    assert sessions == [room, thread, thread, room]
    assert "Plan the trip to Oslo in May" in inbox.received[1].text
    assert inbox.received[1].text.endswith("what about hotels?")
    assert inbox.received[2].text == "and trains?"  # the root only the first time
    [reply] = alice.replies_to(bot.user_id, first)
    relation = reply.content["m.relates_to"]
    assert (relation["rel_type"], relation["event_id"]) == ("m.thread", root)


def test_auto_scope_threads_in_groups_rooms_in_direct_chats() -> None:
    policy = Policy.build(
        "@bot:x", allowed_users=[], allowed_servers=[], allowed_rooms=[], open_rooms=[]
    )
    assert policy.session_of("!dm", direct=True, thread_root="$r") == "!dm"
    assert policy.session_of("!group", direct=False, thread_root="$r") == "!group/thread/$r"
    assert policy.session_of("!group", direct=False, thread_root=None) == "!group"
    policy.room_scopes = {"!group": "room"}
    assert policy.session_of("!group", direct=False, thread_root="$r") == "!group"
    policy.session_scope = "thread"
    assert policy.session_of("!dm", direct=True, thread_root="$r") == "!dm/thread/$r"
