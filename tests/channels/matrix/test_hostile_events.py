"""Odd and hostile events on a real homeserver, and refusals of the bot's sends: junk in a
relation is not copied into the reply, a wrongly typed optional field does not cost the
message, a huge message is cut, an encrypted event no key can open is not waited for, a
user id full of path characters steers no file, and a send the homeserver refuses for good
is a `PermanentError`, not an endless retry."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nio import ErrorResponse, Event, MegolmEvent
from structlog.testing import capture_logs

from squidd.channels.matrix import e2ee
from squidd.channels.matrix.client import send_refusal
from squidd.channels.matrix.events import TRUNCATED_NOTE, event_id_or_none
from squidd.core.models import Outbound, SessionId
from squidd.errors import DeliveryError, PermanentError
from tests.servers.synapse.server import SynapseServer, User
from tests.support.matrix import bot_settings, wait_until
from tests.support.matrix_channel import AliceAllowed, run_channel

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


def _files(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def _send_raw(
    synapse: SynapseServer, user: Any, room: str, event_type: str, content: dict[str, Any]
) -> str:
    """Send an event as the homeserver gets it, past any client-side checks."""
    txn = uuid.uuid4().hex
    result = synapse.call(
        "PUT",
        f"/_matrix/client/v3/rooms/{room}/send/{event_type}/{txn}",
        content,
        token=user.user.access_token,
    )
    event_id: str = result["event_id"]
    return event_id


async def _dm(synapse: SynapseServer, bot: User, alice: Any) -> str:
    room: str = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
    return room


async def test_junk_thread_roots_are_not_copied_into_the_reply(
    synapse: SynapseServer, bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir):
        room = await _dm(synapse, bot, alice)
        junk = [
            _send_raw(
                synapse,
                alice,
                room,
                "m.room.message",
                {
                    "msgtype": "m.text",
                    "body": f"thread root {i}",
                    "m.relates_to": {"rel_type": "m.thread", "event_id": root},
                },
            )
            for i, root in enumerate([42, {"$x": 1}])
        ]
        for event_id in junk:
            await alice.wait_for(
                lambda e=event_id: bool(alice.replies_to(bot.user_id, e)), f"reply to {event_id}"
            )
    # Plain replies: the junk thread roots went nowhere.
    for event_id in junk:
        [reply] = alice.replies_to(bot.user_id, event_id)
        assert reply.content["m.relates_to"] == {"m.in_reply_to": {"event_id": event_id}}


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_a_non_string_formatted_body_is_answered_from_the_body(
    synapse: SynapseServer, bot: User, data_dir: Path, encrypted: bool, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    content = {
        "msgtype": "m.text",
        "body": "plain body wins",
        "format": "org.matrix.custom.html",
        "formatted_body": 42,
    }
    async with run_channel(settings, data_dir):
        room = await alice.create_room([bot.user_id], direct=True, encrypted=encrypted)
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        if encrypted:  # nio encrypts whatever content it is given
            await alice.sync()
            odd_html = await alice.send_event(room, "m.room.message", content)
        else:
            odd_html = _send_raw(synapse, alice, room, "m.room.message", content)
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, odd_html), "reply")
    [reply] = alice.replies_to(bot.user_id, odd_html)
    assert reply.content["body"] == "echo: plain body wins"


async def test_a_huge_message_is_cut_and_the_model_told(
    synapse: SynapseServer, bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir) as (_channel, inbox):
        room = await _dm(synapse, bot, alice)
        huge = await alice.send(room, "head " + "y" * 30_000)
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, huge), "reply")
    [cut] = [m.text for m in inbox.received if m.source_id == huge]
    assert cut == "head " + "y" * 19_995 + TRUNCATED_NOTE


async def test_an_encrypted_event_no_key_can_open_is_not_waited_for(
    synapse: SynapseServer, bot: User, make_human: MakeHuman, data_dir: Path
) -> None:
    alice = await make_human("alice")
    # A key that never comes would hold the sync position for the whole wait.
    settings = bot_settings(synapse, bot, allowed_users=[alice.user_id], decrypt_wait_s=3600)
    with capture_logs() as logs:
        async with run_channel(settings, data_dir) as (_channel, inbox):
            room = await alice.create_room([bot.user_id], direct=True)
            await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
            _send_raw(
                synapse,
                alice,
                room,
                "m.room.encrypted",
                {
                    "algorithm": "m.megolm.v1.aes-sha2",
                    "ciphertext": "AAAA",
                    "sender_key": "B" * 43,
                    "device_id": alice.user.device_id,
                    "session_id": "../../etc",
                },
            )
            after = await alice.send(room, "after the junk")
            await alice.wait_for(lambda: alice.replies_to(bot.user_id, after), "reply")
            await inbox.all_acked()
    assert any(
        e["event"] == "matrix_undecryptable_malformed" and "session_id" in e["reason"] for e in logs
    )
    # Neither waited for nor a room key requested for it.
    assert not any(e["event"] == "matrix_undecryptable" for e in logs)

    # The position moved past the junk: a restart re-delivers nothing.
    async with run_channel(settings, data_dir) as (_channel, inbox):
        sentinel = await alice.send(room, "sentinel")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sentinel), "sentinel reply")
    assert inbox.texts() == ["sentinel"]


async def test_a_bot_user_id_full_of_path_characters_steers_no_file(
    synapse: SynapseServer, make_human: MakeHuman, tmp_path: Path, uid: str
) -> None:
    bot = synapse.register(f"../../squidd-{uid}", password=f"pw-{uid}")
    alice = await make_human("alice")
    jail = tmp_path / "jail"
    data_dir = jail / "x" / "y" / "data"
    data_dir.mkdir(parents=True)
    outside_before = _files(jail) - _files(data_dir)
    settings = bot_settings(synapse, bot, allowed_users=[alice.user_id])
    async with run_channel(settings, data_dir):
        # Encrypted: the bot marks alice's device as trusted, which writes nio's trust file.
        room = await alice.room_with(bot.user_id, encrypted=True)
        asked = await alice.send(room, "hello from an odd bot's friend")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, asked), "reply")
    [reply] = alice.replies_to(bot.user_id, asked)
    assert reply.event.decrypted
    assert _files(jail) - _files(data_dir) == outside_before
    store = data_dir / "matrix" / "store"
    trusted = [p for p in store.iterdir() if p.name.endswith(".trusted_devices")]
    assert len(trusted) == 1
    assert alice.user_id in trusted[0].read_text()
    for path in _files(data_dir):
        assert path.resolve().is_relative_to(data_dir.resolve())


async def test_a_send_to_a_room_the_bot_was_kicked_from_is_permanent(
    synapse: SynapseServer, bot: User, data_dir: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    async with run_channel(settings, data_dir) as (channel, _inbox):
        room = await alice.create_room([bot.user_id], name="kick")
        await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
        # The channel knows the room (so the send goes out) when the bot is kicked.
        await wait_until(
            lambda: channel.client is not None and room in channel.client.rooms, "room known"
        )
        synapse.call(
            "POST",
            f"/_matrix/client/v3/rooms/{room}/kick",
            {"user_id": bot.user_id, "reason": "test"},
            token=alice.user.access_token,
        )
        outbound = Outbound("matrix", room, "anyone there?", SessionId(room))
        with pytest.raises(PermanentError, match="M_FORBIDDEN"):
            await channel.send(outbound)


class _Transport:
    def __init__(self, status: int) -> None:
        self.status = status


@pytest.mark.parametrize(
    ("status", "errcode", "permanent"),
    [
        (403, "M_FORBIDDEN", True),
        (413, "M_TOO_LARGE", True),
        (400, "M_BAD_JSON", True),
        (429, "M_LIMIT_EXCEEDED", False),
        (500, "M_UNKNOWN", False),
        (502, "unknown", False),
        (401, "M_UNKNOWN_TOKEN", False),  # the sync loop fails the channel; the reply waits
    ],
)
def test_send_refusals_split_permanent_from_transient(
    status: int, errcode: str, permanent: bool
) -> None:
    response = ErrorResponse("refused", errcode)
    response.transport_response = _Transport(status)
    error = send_refusal("!r:x", response)
    assert isinstance(error, PermanentError) is permanent
    assert isinstance(error, DeliveryError) is not permanent


async def test_real_megolm_events_pass_the_malformed_check(
    synapse: SynapseServer, bot: User, make_human: MakeHuman
) -> None:
    """The check that passes over junk must never pass over a real encrypted message (which
    may be waiting for its key)."""
    alice = await make_human("alice")
    room = await alice.create_room([bot.user_id], direct=True, encrypted=True)
    sent = await alice.send(room, "a real encrypted message")
    raw = synapse.call(
        "GET", f"/_matrix/client/v3/rooms/{room}/event/{sent}", token=alice.user.access_token
    )
    event = Event.parse_event(raw)
    assert isinstance(event, MegolmEvent)
    assert e2ee.malformed_megolm(event) is None
    for field, junk in [("session_id", "../../etc"), ("algorithm", "m.olm.v1"), ("ciphertext", 7)]:
        bad = Event.parse_event({**raw, "content": {**raw["content"], field: junk}})
        assert not isinstance(bad, MegolmEvent) or e2ee.malformed_megolm(bad) is not None


def test_event_ids_are_checked_as_the_spec_types_them() -> None:
    assert event_id_or_none("$abc:example.org") == "$abc:example.org"
    assert event_id_or_none("$" + "A" * 43) is not None
    for junk in [42, {"$x": 1}, None, "abc", "$", "$a b", "$abc\n", "$" + "a" * 255, "$\ud800"]:
        assert event_id_or_none(junk) is None
