"""Status reactions on a person's message, against a real Synapse: 👀 and a read receipt
when the message is taken, the 👀 redacted and ✅ put in its place once the reply is sent,
❌ when it was given up on without a reply (refused for good, parked); none of it when
switched off. A burst of three messages 200 ms apart gets one answer that saw all three,
and each of them its ✅."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from squidd.channels.matrix.channel import MatrixChannel
from squidd.core.models import Inbound
from squidd.core.ports import ChannelState
from squidd.core.settlement import give_up
from squidd.gateway.bursts import Bursts
from squidd.gateway.pipeline import Pipeline
from tests.servers.synapse.server import SynapseServer, User
from tests.support.doubles import memory_poison
from tests.support.matrix import bot_settings
from tests.support.matrix_channel import AliceAllowed, AnsweringInbox, echo, run_channel

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


def reactions(human: Any, sender: str, event_id: str) -> dict[str, str]:
    """key -> reaction event id, of `sender`'s reactions on `event_id` not redacted since."""
    redacted = {
        s.event.source.get("redacts") or s.event.source.get("content", {}).get("redacts")
        for s in human.events
        if s.event.source.get("type") == "m.room.redaction"
    }
    found = {}
    for s in human.events:
        source = s.event.source
        relates = source.get("content", {}).get("m.relates_to", {})
        if (
            source.get("type") == "m.reaction"
            and source.get("sender") == sender
            and relates.get("event_id") == event_id
            and source.get("event_id") not in redacted
        ):
            found[relates.get("key")] = source.get("event_id")
    return found


async def read_by(synapse: SynapseServer, human: Any, room: str, user_id: str) -> set[str]:
    """The events `user_id`'s read receipts point at in `room` (a fresh initial sync)."""
    answer = await anyio.to_thread.run_sync(
        lambda: synapse.call(
            "GET", "/_matrix/client/v3/sync?timeout=0", token=human.client.access_token
        )
    )
    events: set[str] = set()
    for event in answer["rooms"]["join"][room]["ephemeral"]["events"]:
        if event.get("type") == "m.receipt":
            for event_id, kinds in event.get("content", {}).items():
                if user_id in kinds.get("m.read", {}):
                    events.add(event_id)
    return events


async def test_taken_then_answered(
    synapse: SynapseServer, bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir) as (_channel, inbox):
        inbox.gate = anyio.Event()  # the turn takes its time
        room = await alice.room_with(bot.user_id)
        sent = await alice.send(room, "hello")
        await alice.wait_for(lambda: "👀" in reactions(alice, bot.user_id, sent), "👀")
        assert sent in await read_by(synapse, alice, room, bot.user_id)
        inbox.gate.set()
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sent), "the reply")
        await alice.wait_for(lambda: reactions(alice, bot.user_id, sent).keys() == {"✅"}, "✅")


class DroppingInbox:
    """Gives every message up without a reply (a reply refused for good, parked)."""

    def __init__(self, tg: TaskGroup) -> None:
        self.poison = memory_poison()
        self._tg = tg

    async def put(self, message: Inbound) -> None:
        self._tg.start_soon(give_up, message, "refused for good")

    def report(self, state: ChannelState, detail: str = "") -> None:
        pass


async def test_given_up_without_a_reply_is_marked_failed(
    bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    channel = MatrixChannel(settings, data_dir)
    async with anyio.create_task_group() as tg:
        await tg.start(channel.run, DroppingInbox(tg))
        room = await alice.room_with(bot.user_id)
        sent = await alice.send(room, "this one fails")
        await alice.wait_for(lambda: reactions(alice, bot.user_id, sent).keys() == {"❌"}, "❌")
        tg.cancel_scope.cancel()


async def test_switched_off_no_reactions_no_receipt(
    synapse: SynapseServer, bot: User, make_human: MakeHuman, data_dir: Path
) -> None:
    alice = await make_human("alice")
    settings = bot_settings(
        synapse, bot, allowed_users=[alice.user_id], status_reactions=False, read_receipts=False
    )
    async with run_channel(settings, data_dir) as (_channel, _inbox):
        room = await alice.room_with(bot.user_id)
        sent = await alice.send(room, "quietly")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sent), "the reply")
        later = await alice.send(room, "and again")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, later), "the second reply")
    assert reactions(alice, bot.user_id, sent) == {}
    assert sent not in await read_by(synapse, alice, room, bot.user_id)


class _NoTurns:
    def running(self, conversation: str) -> bool:
        return False

    async def idle(self, conversation: str) -> None:
        return None


async def test_a_burst_of_three_gets_one_answer_and_every_message_a_check_mark(
    bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    channel = MatrixChannel(settings, data_dir)
    async with anyio.create_task_group() as tg:
        answering = AnsweringInbox(channel, tg, echo)
        pipeline = Pipeline([Bursts(quiet_s=1.5, running=_NoTurns())], answering)
        await tg.start(pipeline.run)
        await tg.start(channel.run, pipeline)
        room = await alice.room_with(bot.user_id)
        sent = []
        for text in ("hi", "can you", "check the logs?"):
            sent.append(await alice.send(room, text))
            await anyio.sleep(0.2)
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sent[-1]), "the answer")
        for event_id in sent:
            await alice.wait_for(
                lambda e=event_id: reactions(alice, bot.user_id, e).keys() == {"✅"}, "✅"
            )
        tg.cancel_scope.cancel()
    [merged] = answering.received
    assert merged.text == "hi\n\ncan you\n\ncheck the logs?"
    assert len(alice.from_sender(bot.user_id, room)) == 1
