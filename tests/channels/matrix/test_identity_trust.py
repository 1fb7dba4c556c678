"""Trust by identity on a real Synapse (`device_trust = "cross-signed"`, the default): an
allowed person's cross-signed device is answered; a device of theirs that their identity
did not sign gets no room key and its messages are not acted on (logged once); when they
reset their identity, nothing of theirs is acted on, the room is told once, until the
operator's `squidd matrix trust` is picked up by the running channel."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nio import MegolmEvent
from structlog.testing import capture_logs

from squidd.channels.matrix.identity.local import IdentityFiles
from tests.servers.synapse.server import SynapseServer, User
from tests.support.matrix import Human, bot_settings, cross_sign, wait_until
from tests.support.matrix_channel import AliceAllowed, run_channel

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


def second_login(synapse: SynapseServer, user: User) -> User:
    """Another device of the same account (a new login)."""
    answer = synapse.call(
        "POST",
        "/_matrix/client/v3/login",
        {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": user.localpart},
            "password": user.password,
        },
    )
    return User(
        user.user_id, user.localpart, user.password, answer["access_token"], answer["device_id"]
    )


def events_named(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry.get("event") == name]


async def test_an_unsigned_device_of_an_allowed_user_gets_no_key_and_is_not_acted_on(
    synapse: SynapseServer,
    bot: User,
    make_human: MakeHuman,
    data_dir: Path,
    alice_allowed: AliceAllowed,
) -> None:
    alice, settings = alice_allowed
    with capture_logs() as logs:
        async with run_channel(settings, data_dir) as (_, inbox):
            room = await alice.room_with(bot.user_id, encrypted=True)
            await alice.send(room, "from the signed device")
            await alice.wait_for(lambda: len(alice.from_sender(bot.user_id, room)) == 1, "reply")

            unsigned: Human = await make_human(
                "alice-laptop", second_login(synapse, alice.user), cross_signed=False
            )
            await unsigned.sync()
            await unsigned.send(room, "from the unsigned device")
            await unsigned.send(room, "again from the unsigned device")
            await alice.sync()
            await alice.send(room, "signed again")
            await wait_until(lambda: "signed again" in inbox.texts(), "the signed message")
            await inbox.all_acked()
            assert inbox.texts() == ["from the signed device", "signed again"]

            # The reply to the last message was not encrypted for the unsigned device.
            await alice.wait_for(lambda: len(alice.from_sender(bot.user_id, room)) == 2, "reply")
            await unsigned.sync()
            from_bot = [
                s for s in unsigned.events if getattr(s.event, "sender", None) == bot.user_id
            ]
            assert any(isinstance(s.event, MegolmEvent) for s in from_bot), from_bot
            readable = [str(getattr(s.event, "body", "")) for s in from_bot]
            assert not any("signed again" in body for body in readable), readable
    untrusted = events_named(logs, "matrix_device_untrusted")
    assert len(untrusted) == 1, untrusted  # once per device, not per message
    assert untrusted[0]["sender"] == alice.user_id
    not_trusted = events_named(logs, "matrix_device_not_trusted")
    assert any(e["device"] == unsigned.user.device_id for e in not_trusted), not_trusted


async def test_an_identity_reset_holds_the_person_until_the_operator_trusts_it(
    synapse: SynapseServer, bot: User, data_dir: Path, tmp_path: Path, alice_allowed: AliceAllowed
) -> None:
    alice, settings = alice_allowed
    with capture_logs() as logs:
        async with run_channel(settings, data_dir) as (_, inbox):
            room = await alice.room_with(bot.user_id, encrypted=True)
            await alice.send(room, "before the reset")
            await wait_until(lambda: inbox.texts() == ["before the reset"], "first message")
            pinned = (await IdentityFiles(data_dir).load_pins())[alice.user_id]

            # Alice (or whoever holds her homeserver) makes a new identity.
            (tmp_path / "reset").mkdir()
            await cross_sign(synapse, alice.user, tmp_path / "reset")
            await alice.send(room, "after the reset")

            def told() -> bool:
                return any(
                    "new identity" in str(s.content.get("body"))
                    for s in alice.from_sender(bot.user_id, room)
                )

            await alice.wait_for(told, "the room is told about the new identity")
            await alice.send(room, "still held")

            def held_messages() -> int:
                return sum(
                    1
                    for e in events_named(logs, "matrix_message_ignored")
                    if e.get("reason") == "identity changed"
                )

            # Both messages since the reset were seen and not acted on.
            await wait_until(lambda: held_messages() == 2, "the held messages")
            await alice.sync(timeout_ms=1000)
            notices = [
                s for s in alice.from_sender(bot.user_id, room) if "new identity" in str(s.content)
            ]
            assert len(notices) == 1
            assert inbox.texts() == ["before the reset"]
            assert (await IdentityFiles(data_dir).load_pins())[alice.user_id] == pinned

            # The operator accepts it (`squidd matrix trust`): the channel picks it up.
            request = await IdentityFiles(data_dir).request_trust(alice.user_id, None)
            await alice.send(room, "accepted now")
            await wait_until(lambda: "accepted now" in inbox.texts(), "message after trust")
            assert not request.exists()
            await inbox.all_acked()
            assert inbox.texts() == ["before the reset", "accepted now"]
            new_pin = (await IdentityFiles(data_dir).load_pins())[alice.user_id]
            assert new_pin != pinned
            await alice.wait_for(
                lambda: bool(alice.replies_to(bot.user_id, inbox.received[-1].source_id)),
                "the reply after trust decrypts",
            )
    changed = events_named(logs, "matrix_identity_changed")
    assert len(changed) == 1 and changed[0]["user"] == alice.user_id, changed
    assert events_named(logs, "matrix_identity_accepted")


@pytest.mark.parametrize("mode", ["cross-signed", "allowlisted"])
async def test_a_legacy_client_without_cross_signing_is_answered_only_when_allowlisted(
    synapse: SynapseServer, bot: User, make_human: MakeHuman, data_dir: Path, mode: str
) -> None:
    legacy: Human = await make_human("legacy", cross_signed=False)
    settings = bot_settings(synapse, bot, allowed_users=[legacy.user_id], device_trust=mode)
    with capture_logs() as logs:
        async with run_channel(settings, data_dir) as (_, inbox):
            room = await legacy.room_with(bot.user_id, encrypted=True)
            await legacy.send(room, "from a legacy client")

            def decided() -> bool:
                refused = [
                    e
                    for e in events_named(logs, "matrix_device_untrusted")
                    if e.get("sender") == legacy.user_id
                ]
                return bool(refused) or "from a legacy client" in inbox.texts()

            await wait_until(decided, "the message answered or refused")
            await inbox.all_acked()
            answered = "from a legacy client" in inbox.texts()
    assert answered is (mode == "allowlisted"), inbox.texts()
