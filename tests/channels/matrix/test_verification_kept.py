"""Verification flows across a restart, without a homeserver: the file round-trips whole,
private; a damaged file or record is skipped with a warning; after a restart a `ready`
flow goes on, one cut after its start is cancelled for her (`m.user`, why) and she is told
in the DM; steps of it that come before are ignored; finished flows leave the file."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from squidd.channels.matrix.verification import wire
from squidd.channels.matrix.verification.flows import Verifications
from squidd.channels.matrix.verification.kept import FILE_NAME, FlowFile, KeptFlow
from tests.channels.matrix.test_sas import ALICE, BOT
from tests.channels.matrix.test_verification_flows import (
    TXN,
    Clock,
    FakeClient,
    event,
    exchange,
    request,
    verifications,
)

pytestmark = pytest.mark.anyio

DM = "!dm:example.org"


def kept(flow_id: str, state: str, age_s: float = 30.0, room: str | None = None) -> KeptFlow:
    return KeptFlow(flow_id, ALICE.user_id, ALICE.device_id, room, state, time.time() - age_s)


async def test_the_file_round_trips_whole_and_is_private(tmp_path: Path) -> None:
    records = [kept("t-1", "ready"), kept("$ev", "keys", room="!r:x"), kept("t-é", "started")]
    await FlowFile(tmp_path / FILE_NAME).save(records)
    assert await FlowFile(tmp_path / FILE_NAME).load() == records
    assert stat.S_IMODE((tmp_path / FILE_NAME).stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [FILE_NAME]  # no temp file left


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"version": 99, "flows": []}',
        '["a list"]',
        '{"version": 1, "flows": "x"}',
    ],
)
async def test_a_damaged_file_is_read_as_empty_with_a_warning(tmp_path: Path, text: str) -> None:
    (tmp_path / FILE_NAME).write_text(text)
    with capture_logs() as logs:
        assert await FlowFile(tmp_path / FILE_NAME).load() == []
    assert [e["event"] for e in logs] == ["matrix_verification_file_unreadable"]


async def test_a_bad_record_is_skipped_and_the_good_ones_kept(tmp_path: Path) -> None:
    good = kept("t-1", "keys")
    bad: list[Any] = [
        {"id": 5},
        None,
        {"id": "x", "user_id": "u", "device_id": "d", "room_id": None, "state": "odd"},
        {"id": "x", "user_id": "u", "device_id": "d", "room_id": 3, "state": "ready"},
        {
            "id": "x",
            "user_id": "u",
            "device_id": "d",
            "room_id": None,
            "state": "ready",
            "started_at": True,
        },
    ]
    record = {k: getattr(good, k) for k in KeptFlow.__slots__}
    (tmp_path / FILE_NAME).write_text(json.dumps({"version": 1, "flows": [record, *bad]}))
    with capture_logs() as logs:
        assert await FlowFile(tmp_path / FILE_NAME).load() == [good]
    assert [e["event"] for e in logs] == ["matrix_verification_record_skipped"]


@pytest.fixture
def sent_in_rooms(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, dict[str, Any]]]:
    sent: list[tuple[str, str, dict[str, Any]]] = []

    async def send_event(client: Any, room_id: str, kind: str, body: Any, **_: Any) -> str:
        sent.append((room_id, kind, body))
        return "$sent"

    monkeypatch.setattr(wire, "send_event", send_event)
    return sent


def daemon(tmp_path: Path) -> tuple[Verifications, FakeClient, Clock]:
    clock = Clock()
    client = FakeClient()
    members = {BOT.user_id: None, ALICE.user_id: None}
    client.rooms = {  # type: ignore[attr-defined]
        "!group:example.org": SimpleNamespace(users={**members, "@bob:example.org": None}),
        DM: SimpleNamespace(users=members),
    }
    return verifications(client, clock, allowed=[ALICE.user_id]), client, clock


async def test_a_restart_resumes_a_ready_flow_and_cancels_one_cut_after_its_start(
    tmp_path: Path, sent_in_rooms: list[tuple[str, str, dict[str, Any]]]
) -> None:
    first, client, _ = daemon(tmp_path)
    await first.restore(tmp_path)
    await exchange(first, client)  # the flow TXN waits for the operator, keys exchanged
    other = request()
    other.source["content"]["transaction_id"] = "txn-ready"
    await first.on_to_device([other])
    stored = {f.id: f.state for f in await FlowFile(tmp_path / FILE_NAME).load()}
    assert stored == {TXN: "keys", "txn-ready": "ready"}

    second, client, _ = daemon(tmp_path)  # the same data folder, a new process
    await second.restore(tmp_path)
    assert {f["id"]: f["state"] for f in second.listing()} == {
        TXN: "interrupted",
        "txn-ready": "ready",
    }
    await second.on_to_device([event("mac", mac={}, keys="x")])  # hers, sent while down
    assert client.sent == []  # nothing answered before the flow is ended
    await second.end_interrupted()
    [(kind, device, content)] = client.sent
    assert (kind, device, content["code"]) == (
        "m.key.verification.cancel",
        ALICE.device_id,
        "m.user",
    )
    assert "restarted" in content["reason"] and content["transaction_id"] == TXN
    [(room, kind, body)] = sent_in_rooms
    assert (room, kind, body["msgtype"]) == (DM, "m.room.message", "m.notice")
    assert "interrupted by a restart" in body["body"]
    stored = {f.id: f.state for f in await FlowFile(tmp_path / FILE_NAME).load()}
    assert stored == {"txn-ready": "ready"}  # the cancelled one left the file

    client.sent.clear()
    await second.on_to_device([event("cancel", code="m.user")])  # she gives up on TXN: known
    await second.on_to_device([event("cancel", code="m.user", transaction_id="txn-ready")])
    assert client.sent == []
    assert await FlowFile(tmp_path / FILE_NAME).load() == []


async def test_flows_older_than_ten_minutes_are_not_restored(tmp_path: Path) -> None:
    await FlowFile(tmp_path / FILE_NAME).save([kept("old", "keys", age_s=700)])
    flows, client, _ = daemon(tmp_path)
    await flows.restore(tmp_path)
    await flows.end_interrupted()
    assert flows.listing() == [] and client.sent == []
