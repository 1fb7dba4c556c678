"""Encrypted events waiting for their keys, without a homeserver: an allowed sender's event
holds the sync position back until `decrypt_wait_s` has passed, then is given up and the
position moves on; junk no key can open, and strangers' events, hold nothing back.

The client is nio's real `AsyncClient`, not logged in (so without encryption keys): it never
touches the network here, and no key can open the event."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from nio import AsyncClient, Event, MegolmEvent
from structlog.testing import capture_logs

from squidd.channels.matrix.policy import Policy
from squidd.channels.matrix.state import Batch, SyncLedger
from squidd.channels.matrix.undecrypted import Undecrypted
from tests.support.doubles import memory_poison

pytestmark = pytest.mark.anyio

BOT = "@squidd:example.org"
ALICE = "@alice:example.org"
ROOM = "!room:example.org"
KEY = "A" * 43
POLICY = Policy.build(
    BOT, allowed_users=[ALICE], allowed_servers=[], allowed_rooms=[], open_rooms=[]
)


class _Inbox:
    """The router's side as the queue sees it: only its poison guard."""

    poison = memory_poison()


_INBOX: Any = _Inbox()


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def client() -> AsyncIterator[AsyncClient]:
    client = AsyncClient("http://127.0.0.1:9", BOT)
    try:
        yield client
    finally:
        await client.close()


def _encrypted(*, sender: str = ALICE, session_id: str = KEY) -> Any:
    event = Event.parse_encrypted_event(
        {
            "type": "m.room.encrypted",
            "event_id": "$secret",
            "sender": sender,
            "origin_server_ts": 1,
            "room_id": ROOM,
            "content": {
                "algorithm": "m.megolm.v1.aes-sha2",
                "ciphertext": "AwgAEnAC",
                "device_id": "DEVICE",
                "sender_key": KEY,
                "session_id": session_id,
            },
        }
    )
    assert isinstance(event, MegolmEvent)
    return event


async def _never_delivered(batch: Batch, room_id: str, event: Any) -> bool:
    raise AssertionError("no key can open the event in these tests")


async def test_a_held_event_keeps_the_position_until_the_wait_is_over(
    client: AsyncClient,
) -> None:
    saved: list[str] = []

    async def save(token: str) -> None:
        saved.append(token)

    clock = _Clock()
    waiting = Undecrypted(wait_s=60, monotonic=clock)
    ledger = SyncLedger(save)
    batch = ledger.open("t1")
    await waiting.hold(client, POLICY, ledger, batch, ROOM, _encrypted())
    await ledger.seal(batch)
    assert saved == []
    clock.now += 59
    await waiting.retry(client, ledger, _never_delivered, _INBOX)
    assert saved == []
    clock.now += 1
    with capture_logs() as logs:
        await waiting.retry(client, ledger, _never_delivered, _INBOX)
    assert saved == ["t1"]
    assert [e["event"] for e in logs] == ["matrix_undecryptable_given_up"]
    assert logs[0]["event_id"] == "$secret"


async def test_junk_and_strangers_events_hold_nothing_back(client: AsyncClient) -> None:
    saved: list[str] = []

    async def save(token: str) -> None:
        saved.append(token)

    waiting = Undecrypted(wait_s=60, monotonic=_Clock())
    ledger = SyncLedger(save)
    batch = ledger.open("t1")
    with capture_logs() as logs:
        await waiting.hold(
            client, POLICY, ledger, batch, ROOM, _encrypted(session_id="../../no key")
        )
        await waiting.hold(
            client, POLICY, ledger, batch, ROOM, _encrypted(sender="@eve:evil.example")
        )
    await ledger.seal(batch)
    assert saved == ["t1"]
    assert [e["event"] for e in logs] == [
        "matrix_undecryptable_malformed",
        "matrix_message_ignored",
    ]
