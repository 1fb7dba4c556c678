"""Verification events of any shape, from anyone, in any order, into the flows object (with
the recording client of test_verification_flows): nothing raises, no step ends in the
"defect" log line, and the flows and answers kept stay bounded. And matrix-nio's own
verification code never sees a to-device verification event."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
import vodozemac
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from nio import KeyVerificationMac, ToDeviceEvent, UnknownToDeviceEvent
from structlog.testing import capture_logs

from squidd.channels.matrix.client import SquiddClient
from squidd.channels.matrix.verification import wire
from squidd.channels.matrix.verification.flows import Verifications
from squidd.channels.matrix.verification.limits import MAX_KEPT_FLOWS
from tests.channels.matrix.test_sas import ALICE, BOT, start_content
from tests.channels.matrix.test_verification_flows import Clock, Event, FakeClient, verifications

PREFIX = "m.key.verification."
REQUEST = PREFIX + "request"
STEPS = ["request", "ready", "start", "accept", "key", "mac", "done", "cancel", "odd"]
ROOM = "!dm:example.org"
SENDERS = [ALICE.user_id] * 4 + ["@mallory:example.org", BOT.user_id, 5, None]
KEY = vodozemac.Curve25519SecretKey().public_key().to_base64()

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=8), st.floats(allow_nan=False)
)
json_any = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


def plausible() -> st.SearchStrategy[Any]:
    """Values that make flows go somewhere, mixed with junk."""
    start = start_content()
    return st.one_of(
        json_any,
        st.sampled_from(["txn-1", "txn-2", "$request", BOT.user_id, REQUEST]),
        st.sampled_from([ALICE.device_id, "OTHER", BOT.device_id]),
        st.just(["m.sas.v1"]),
        st.just(int(time.time() * 1000)),
        st.just(KEY),
        st.just({"rel_type": "m.reference", "event_id": "$request"}),
        st.just({f"ed25519:{ALICE.device_id}": "AAAA"}),
        st.sampled_from([v for v in start.values() if isinstance(v, list | str)]),
    )


KEYS = [
    "transaction_id",
    "from_device",
    "methods",
    "method",
    "timestamp",
    "key",
    "mac",
    "keys",
    "code",
    "reason",
    "to",
    "msgtype",
    "m.relates_to",
    "key_agreement_protocols",
    "hashes",
    "message_authentication_codes",
    "short_authentication_string",
    "commitment",
]


def near(base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """`base` (a step that checks out) with a few of its fields replaced or added."""
    changes = st.dictionaries(st.sampled_from(KEYS), plausible(), max_size=2)
    return st.builds(lambda extra: {**base, **extra}, changes)


REQUEST_CONTENT = {
    "transaction_id": "txn-1",
    "from_device": ALICE.device_id,
    "methods": ["m.sas.v1"],
    "timestamp": int(time.time() * 1000),
}
content_strategy = st.one_of(
    st.dictionaries(st.sampled_from(KEYS), plausible(), max_size=10),
    near(REQUEST_CONTENT),
    near({**start_content(transaction_id="txn-1"), "m.relates_to": None}),
    near({"transaction_id": "txn-1", "key": KEY}),
    near({"transaction_id": "txn-1", "mac": {f"ed25519:{ALICE.device_id}": "AAAA"}, "keys": "A"}),
    json_any,
)
source_strategy = st.fixed_dictionaries(
    {
        "type": st.sampled_from([PREFIX + s for s in STEPS] + ["m.room.message", 5, None]),
        "sender": st.sampled_from(SENDERS),
        "content": content_strategy,
    },
    optional={
        "event_id": st.sampled_from(["$request", "$other", 7]),
        "origin_server_ts": st.just(int(time.time() * 1000)),
    },
)
operation = st.one_of(
    st.tuples(st.just("to-device"), st.lists(source_strategy, max_size=3)),
    st.tuples(st.just("room"), source_strategy),
    st.tuples(st.just("confirm"), st.booleans()),
    st.tuples(st.just("tick"), st.sampled_from([1.0, 300.0, 601.0])),
)


async def play(operations: list[tuple[str, Any]]) -> tuple[Verifications, FakeClient]:
    clock = Clock()
    client = FakeClient()
    flows = verifications(client, clock, allowed=[ALICE.user_id])
    for kind, value in operations:
        if kind == "to-device":
            await flows.on_to_device([Event(source) for source in value])
        elif kind == "room":
            await flows.take(ROOM, Event(value))
        elif kind == "confirm":
            await flows.confirm(None, match=value)
        else:
            clock.now += value
        flows.listing()
    return flows, client


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=st.lists(operation, max_size=12))
@example(
    operations=[
        (
            "to-device",
            [
                {
                    "type": REQUEST,
                    "sender": ALICE.user_id,
                    "content": {**REQUEST_CONTENT, "methods": 5},
                }
            ],
        )
    ]
)
def test_any_sequence_of_verification_events_never_raises(
    operations: list[tuple[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent_in_rooms: list[tuple[str, str]] = []

    async def send_event(client: Any, room_id: str, kind: str, body: Any, **_: Any) -> str:
        sent_in_rooms.append((room_id, kind))
        return "$sent"

    monkeypatch.setattr(wire, "send_event", send_event)
    with capture_logs() as logs:
        flows, _ = anyio.run(play, operations)
    defects = [e for e in logs if e.get("log_level") in ("error", "critical")]
    assert defects == [], defects
    assert len(flows.listing()) <= MAX_KEPT_FLOWS


class RecordingOlm:
    def __init__(self) -> None:
        self.handled: list[Any] = []

    def handle_to_device_event(self, event: Any) -> None:
        self.handled.append(event)


def test_nio_never_sees_a_to_device_verification_event(tmp_path: Any) -> None:
    client = SquiddClient("http://127.0.0.1:9", "@bot:example.org", store_path=str(tmp_path))
    client.olm = RecordingOlm()
    mac = {"transaction_id": "t", "mac": {"ed25519:X": "AAAA"}, "keys": "AAAA"}
    event = ToDeviceEvent.parse_event(
        {"type": PREFIX + "mac", "sender": ALICE.user_id, "content": mac}
    )
    assert isinstance(event, KeyVerificationMac)
    other = ToDeviceEvent.parse_event({"type": "m.dummy", "sender": "@a:b", "content": {"x": 1}})
    assert isinstance(other, UnknownToDeviceEvent)
    assert client._handle_decrypt_to_device(event) is None
    client._handle_decrypt_to_device(other)
    assert client.olm.handled == [other]
