"""The verification flows without a homeserver: a client that records what the bot sends,
and a person played with vodozemac (`test_sas.Starter`). Who is answered and who refused,
the operator's yes and no, the 10-minute limit, and events that are out of order, from
another device or plain junk: each ends in a cancel or is ignored, never in a crash."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from nio import ToDeviceMessage, ToDeviceResponse

from squidd.channels.matrix.policy import Policy
from squidd.channels.matrix.verification.flows import Verifications
from squidd.channels.matrix.verification.limits import (
    MAX_KEPT_FLOWS,
    MAX_LIVE_FLOWS,
    MAX_LIVE_PER_USER,
)
from tests.channels.matrix.test_sas import ALICE, BOT, Starter, start_content

pytestmark = pytest.mark.anyio

TXN = "txn-1"
BOT_DEVICE_KEY = "bot-device-ed25519"
ALICE_DEVICE_KEY = "alice-device-ed25519"


@dataclass
class Device:
    user_id: str
    id: str
    ed25519: str


class DeviceStore:
    def __init__(self, devices: list[Device]) -> None:
        self.devices = devices

    def active_user_devices(self, user_id: str) -> list[Device]:
        return [d for d in self.devices if d.user_id == user_id]


@dataclass
class Account:
    identity_keys: dict[str, str] = field(default_factory=lambda: {"ed25519": BOT_DEVICE_KEY})


@dataclass
class Olm:
    account: Account = field(default_factory=Account)
    users_for_key_query: set[str] = field(default_factory=set)
    outgoing_to_device_messages: list[Any] = field(default_factory=list)


@dataclass
class FixedLink:
    """The connection of the moment, as `Verifications` asks for it (`online.Link`)."""

    client: Any
    policy: Policy
    identity: Any = None

    def apply_trust(self) -> None:
        return None


def verifications(client: Any, clock: Clock, *, allowed: list[str]) -> Verifications:
    """`Verifications` linked to `client`, for a policy that lets `allowed` in."""
    policy = Policy.build(
        BOT.user_id, allowed_users=allowed, allowed_servers=[], allowed_rooms=[], open_rooms=[]
    )
    return Verifications(FixedLink(client, policy), monotonic=clock)


class FakeClient:
    """What `Verifications` uses of nio's AsyncClient; keeps what was sent."""

    def __init__(self) -> None:
        self.user_id = BOT.user_id
        self.device_id = BOT.device_id
        self.olm = Olm()
        self.device_store = DeviceStore([Device(ALICE.user_id, ALICE.device_id, ALICE_DEVICE_KEY)])
        self.sent: list[tuple[str, str, dict[str, Any]]] = []
        self.verified: list[str] = []

    async def to_device(self, message: ToDeviceMessage, tx_id: str | None = None) -> Any:
        self.sent.append((message.type, message.recipient_device, message.content))
        return ToDeviceResponse(message)

    async def keys_query(self) -> None:
        return None

    def verify_device(self, device: Device) -> None:
        self.verified.append(device.id)

    def last(self) -> tuple[str, dict[str, Any]]:
        kind, _, content = self.sent[-1]
        return kind, content


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Event:
    source: dict[str, Any]


def event(kind: str, sender: str = ALICE.user_id, **content: Any) -> Event:
    body = {"transaction_id": TXN, **content}
    return Event({"type": f"m.key.verification.{kind}", "sender": sender, "content": body})


def request(sender: str = ALICE.user_id, **overrides: Any) -> Event:
    now_ms = int(time.time() * 1000)
    content = {"from_device": ALICE.device_id, "methods": ["m.sas.v1"], "timestamp": now_ms}
    content.update(overrides)
    return event("request", sender, **content)


@pytest.fixture
def setup() -> tuple[Verifications, FakeClient, Clock]:
    clock = Clock()
    client = FakeClient()
    return verifications(client, clock, allowed=[ALICE.user_id]), client, clock


async def exchange(flows: Verifications, client: FakeClient) -> Starter:
    """Request, start and keys: the flow waits for the operator."""
    await flows.on_to_device([request()])
    assert client.last() == (
        "m.key.verification.ready",
        {"from_device": BOT.device_id, "methods": ["m.sas.v1"], "transaction_id": TXN},
    )
    start = start_content(transaction_id=TXN)
    del start["m.relates_to"]
    alice = Starter(start)
    await flows.on_to_device([event("start", **start)])
    kind, accept = client.last()
    assert kind == "m.key.verification.accept"
    await flows.on_to_device([event("key", key=alice.key)])
    kind, key = client.last()
    assert kind == "m.key.verification.key"
    alice.take_key(accept, key["key"])
    return alice


def their_mac(alice: Starter) -> dict[str, Any]:
    # The exchange's MAC strings name the flow: here the transaction id.
    alice_info = f"MATRIX_KEY_VERIFICATION_MAC{ALICE.user_id}{ALICE.device_id}"
    alice_info += f"{BOT.user_id}{BOT.device_id}{TXN}"
    keys = {f"ed25519:{ALICE.device_id}": ALICE_DEVICE_KEY}
    assert alice.established is not None
    return {
        "mac": {k: alice.established.calculate_mac(v, alice_info + k) for k, v in keys.items()},
        "keys": alice.established.calculate_mac(",".join(sorted(keys)), alice_info + "KEY_IDS"),
    }


async def test_an_allowed_person_is_verified_once_the_operator_says_yes(
    setup: tuple[Verifications, FakeClient, Clock],
) -> None:
    flows, client, _ = setup
    alice = await exchange(flows, client)
    [shown] = flows.listing()
    assert shown["state"] == "keys" and len(shown["emoji"]) == 7 and len(shown["decimals"]) == 3

    await flows.on_to_device([event("mac", **their_mac(alice))])  # theirs may come first
    assert client.verified == []
    answer = await flows.confirm(None, match=True)
    assert answer["verification"]["state"] == "done"
    kinds = [kind for kind, _, _ in client.sent]
    assert kinds[-2:] == ["m.key.verification.mac", "m.key.verification.done"]
    assert client.verified == [ALICE.device_id]


async def test_the_operators_no_cancels_with_mismatched_sas(
    setup: tuple[Verifications, FakeClient, Clock],
) -> None:
    flows, client, _ = setup
    await exchange(flows, client)
    answer = await flows.confirm(ALICE.user_id, match=False)
    assert answer["verification"]["state"] == "cancelled"
    assert client.last()[1]["code"] == "m.mismatched_sas"
    assert client.verified == []
    assert "no verification waits" in (await flows.confirm(None, match=True))["error"]


async def test_a_forged_mac_cancels_with_key_mismatch(
    setup: tuple[Verifications, FakeClient, Clock],
) -> None:
    flows, client, _ = setup
    alice = await exchange(flows, client)
    client.device_store.devices[0].ed25519 = "a-key-of-mallory"  # what the bot knows of her
    await flows.on_to_device([event("mac", **their_mac(alice))])
    await flows.confirm(None, match=True)
    assert client.last()[1]["code"] == "m.key_mismatch"
    assert client.verified == []


@pytest.mark.parametrize(
    ("asked", "code"),
    [
        ({"sender": "@mallory:example.org"}, "m.user"),
        ({"methods": ["m.qr_code.show.v1"]}, "m.unknown_method"),
    ],
)
async def test_refused_requests(
    setup: tuple[Verifications, FakeClient, Clock], asked: dict[str, Any], code: str
) -> None:
    # The request is made when the test runs: its timestamp must be fresh (a request older
    # than ten minutes is ignored, as the spec says), not the time the suite was collected.
    flows, client, _ = setup
    await flows.on_to_device([request(**asked)])
    kind, content = client.last()
    assert (kind, content["code"], content["transaction_id"]) == (
        "m.key.verification.cancel",
        code,
        TXN,
    )
    assert [f["state"] for f in flows.listing()] == ([] if code == "m.user" else ["cancelled"])


async def test_a_flood_of_requests_keeps_a_bounded_number_of_flows_and_answers(
    setup: tuple[Verifications, FakeClient, Clock],
) -> None:
    flows, client, _ = setup
    for i in range(100):
        incoming = request()
        incoming.source["content"]["transaction_id"] = f"txn-{i}"
        await flows.on_to_device([incoming])
        stranger = request(sender="@mallory:example.org")
        stranger.source["content"]["transaction_id"] = f"m-{i}"
        await flows.on_to_device([stranger])
    assert len(flows.listing()) == MAX_LIVE_PER_USER
    kinds = [kind.rsplit(".", 1)[1] for kind, _, _ in client.sent]
    assert kinds.count("ready") == MAX_LIVE_PER_USER
    cancels = [content["transaction_id"] for kind, _, content in client.sent if "cancel" in kind]
    # One cancel for the stranger in the minute, a few for her requests over the limit.
    assert [c for c in cancels if c.startswith("m-")] == ["m-0"]
    assert 1 <= len([c for c in cancels if c.startswith("txn-")]) <= 10


async def test_many_people_and_strangers_never_grow_the_flows_or_the_answers(
    setup: tuple[Verifications, FakeClient, Clock],
) -> None:
    _, client, clock = setup
    people = [f"@p{i}:example.org" for i in range(40)]
    flows = verifications(client, clock, allowed=people)
    for round_ in range(5):
        for person in people:
            incoming = request(sender=person)
            incoming.source["content"]["transaction_id"] = f"{person}-{round_}"
            await flows.on_to_device([incoming])
            cancel = event("cancel", sender=person, code="m.user")
            cancel.source["content"]["transaction_id"] = f"{person}-{round_}"
            await flows.on_to_device([cancel])
        for n in range(1000):
            await flows.on_to_device([request(sender=f"@s{round_}-{n}:example.org")])
        clock.now += 1
    assert len(flows.listing()) <= MAX_KEPT_FLOWS
    assert flows._answers.remembered() <= 3 * 512
    refused = [c for k, _, c in client.sent if "cancel" in k and c["code"] == "m.user"]
    assert len(refused) <= 20  # strangers in one minute, whoever they are
    assert len([f for f in flows.listing() if f["state"] == "ready"]) <= MAX_LIVE_FLOWS


@pytest.mark.parametrize(
    "steps",
    [
        ["mac"],  # a MAC before any start
        ["start", "mac"],  # a MAC before the keys
        ["start", "start"],  # a second start
        ["start", "accept"],  # an accept to the side that accepts
        ["key"],  # a key before the start
        ["start", "what"],  # a step the spec does not know
    ],
)
async def test_steps_out_of_order_cancel_with_unexpected_message(
    setup: tuple[Verifications, FakeClient, Clock], steps: list[str]
) -> None:
    flows, client, _ = setup
    await flows.on_to_device([request()])
    start = start_content(transaction_id=TXN)
    del start["m.relates_to"]
    contents = {"start": start, "mac": {"mac": {}, "keys": "x"}, "key": {"key": "k"}}
    for step in steps:
        await flows.on_to_device([event(step, **contents.get(step, {}))])
    assert client.last()[0] == "m.key.verification.cancel"
    assert client.last()[1]["code"] == "m.unexpected_message"
    assert [f["state"] for f in flows.listing()] == ["cancelled"]


@pytest.mark.parametrize("offset_min", [-11, +6, None])
async def test_a_stale_request_is_not_answered(
    setup: tuple[Verifications, FakeClient, Clock], offset_min: int | None
) -> None:
    flows, client, _ = setup
    now_ms = int(time.time() * 1000)
    sent = "yesterday" if offset_min is None else now_ms + offset_min * 60 * 1000
    await flows.on_to_device([request(timestamp=sent)])
    assert client.sent == [] and flows.listing() == []


async def test_a_flow_older_than_ten_minutes_is_cancelled(
    setup: tuple[Verifications, FakeClient, Clock],
) -> None:
    flows, client, clock = setup
    await exchange(flows, client)
    clock.now += 601
    await flows.on_to_device([])
    assert client.last()[1]["code"] == "m.timeout"
    assert flows.listing() == []


async def test_out_of_order_foreign_and_junk_events_never_crash(
    setup: tuple[Verifications, FakeClient, Clock],
) -> None:
    flows, client, _ = setup
    junk: list[Any] = [
        Event({"type": "m.key.verification.request", "content": "not a dict"}),
        Event({"type": "m.key.verification.key", "sender": ALICE.user_id, "content": {}}),
        event("mac", sender="@mallory:example.org", mac="x", keys=3),  # a stranger's: ignored
        object(),
        Event({"type": "m.room_key", "content": {"transaction_id": TXN}}),
    ]
    await flows.on_to_device(junk)
    assert client.sent == []
    # A step of a flow begun before a restart: her devices are told, a stranger's are not.
    await flows.on_to_device([event("key", sender="@mallory:example.org", key="k")])
    assert client.sent == []
    await flows.on_to_device([event("key", key="k"), event("cancel", code="m.user")])
    assert client.sent == [
        (
            "m.key.verification.cancel",
            "*",
            {
                "code": "m.unknown_transaction",
                "reason": "squidd knows no such verification",
                "transaction_id": TXN,
            },
        )
    ]
    client.sent.clear()
    await flows.on_to_device([request()])
    await flows.on_to_device([event("key", key="early")])  # key before start
    assert client.last()[1]["code"] == "m.unexpected_message"

    client.sent.clear()
    flows._flows.clear()
    await flows.on_to_device([request()])
    start = start_content(transaction_id=TXN, from_device="OTHERDEVICE")
    await flows.on_to_device([event("start", **start)])
    assert client.last()[1]["code"] == "m.unexpected_message"
