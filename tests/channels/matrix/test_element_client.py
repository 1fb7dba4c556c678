"""The Element-like test client itself, on the real Synapse: two cross-signed matrix-js-sdk
clients read each other in an encrypted DM, and the same client refuses a device its owner
did not cross-sign (a matrix-nio client in the legacy mode), both ways: it withholds its room
key from that device and will not decrypt what that device sends; squidd, cross-signed by
its own identity, gets the key and its reply shows no warning."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.servers.element.client import ElementClient
from tests.servers.synapse.server import User
from tests.support.fake_llm import FakeLLM
from tests.support.matrix import Human
from tests.support.matrix_daemon import (
    MatrixSquidd,
    dm_on_element,
    user_texts,
)

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

MakeElement = Callable[..., Any]
MakeHuman = Callable[..., Any]


async def test_two_cross_signed_clients_read_each_other_without_a_warning(
    make_element: MakeElement,
) -> None:
    alice: ElementClient = await make_element("alice")
    bob: ElementClient = await make_element("bob")
    room = await alice.create_dm(bob.user_id)
    await alice.wait_joined(room, bob.user_id)

    await alice.send_text(room, "hello bob")
    [seen] = await bob.wait_messages(alice.user_id, room)
    assert seen["body"] == "hello bob" and seen["encrypted"], seen
    assert seen["shield"] == {"colour": "NONE", "reason": None}, seen

    await bob.send_text(room, "hello alice")
    [back] = await alice.wait_messages(bob.user_id, room)
    assert back["body"] == "hello alice" and back["shield"]["colour"] == "NONE", back
    trust = await alice.device_trust(bob.user_id, bob.device_id)
    assert trust is not None and trust["signed_by_owner"], trust


async def test_an_identity_reset_shows_on_the_other_side(make_element: MakeElement) -> None:
    alice: ElementClient = await make_element("alice")
    bob: ElementClient = await make_element("bob")
    room = await alice.create_dm(bob.user_id)
    await alice.wait_joined(room, bob.user_id)
    await alice.send_text(room, "before")
    await bob.wait_messages(alice.user_id, room)
    assert not (await bob.user_trust(alice.user_id))["needs_user_approval"]

    old = (await alice.call("cross_signing_status"))["master_key"]
    new = (await alice.bootstrap_cross_signing(reset=True))["master_key"]
    assert new and new != old
    assert (await bob.wait_needs_approval(alice.user_id))["needs_user_approval"]


async def test_a_device_its_owner_did_not_cross_sign_gets_no_key_and_is_not_believed(
    make_element: MakeElement, make_human: MakeHuman
) -> None:
    alice: ElementClient = await make_element("alice")
    nio: Human = await make_human("nio", cross_signed=False)  # legacy: no cross-signing
    room = await alice.create_dm(nio.user_id)
    await nio.wait_for(lambda: room in nio.client.invited_rooms, "invite")
    await nio.join(room)
    await alice.wait_joined(room, nio.user_id)
    trust = await alice.device_trust(nio.user_id, nio.user.device_id)
    assert trust is not None and not trust["signed_by_owner"], trust

    # Alice's client withholds the room key from the unsigned device, saying why.
    await alice.send_text(room, "for signed devices only")
    withheld: list[dict[str, Any]] = []

    def withheld_seen() -> bool:
        withheld[:] = [
            e.source["content"]
            for e in nio.to_device
            if e.source.get("type") == "m.room_key.withheld"
        ]
        return bool(withheld)

    await nio.wait_for(withheld_seen, "m.room_key.withheld")
    assert withheld[0]["code"] == "m.unverified", withheld
    assert not nio.from_sender(alice.user_id, room)  # nothing decrypted

    # And what the unsigned device sends does not decrypt on her side.
    await nio.send(room, "from an unsigned device")
    [seen] = await alice.wait_messages(nio.user_id, room)
    assert seen["body"] is None and seen["failure"] == "UNSIGNED_SENDER_DEVICE", seen


async def test_squidd_is_cross_signed_so_element_shares_its_key_and_trusts_the_reply(
    bot: User, make_element: MakeElement, fake_llm: FakeLLM, matrix_squidd: MatrixSquidd
) -> None:
    alice: ElementClient = await make_element("alice")
    _, daemon = await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await dm_on_element(alice, bot)
    devices = (await alice.user_trust(bot.user_id))["devices"]
    assert len(devices) == 1, devices
    trust = await alice.device_trust(bot.user_id, devices[0])
    # The bot's own identity signed its device: her client shares the room key with it
    # (without it she withholds it and squidd logs "no session found").
    assert trust is not None and trust["signed_by_owner"], trust

    hello = await alice.send_text(room, "hello squidd")
    replies = await alice.wait_messages(bot.user_id, room)
    assert [r["body"] for r in replies] == ["echo: hello squidd"], replies
    assert user_texts(fake_llm) == ["hello squidd"]
    assert replies[0]["in_reply_to"] == hello
    assert replies[0]["shield"] == {"colour": "NONE", "reason": None}, replies
    assert daemon.proc.poll() is None
