"""Verification events nobody asked for, against `squidd run` on the real Synapse: a raw
HTTP client (the person's account and a stranger's) sends the bot's device to-device and
in-room verification steps in every wrong order and shape, the MAC of a flow the bot never
accepted among them (matrix-nio's own verification code asserted on it and took the whole
Matrix child down). Then the person verifies the bot from her Element (matrix-js-sdk, Rust
crypto) by emoji and writes in the DM: verified, answered, and no crash and no error line
in the daemon's log. The report's own sequence, a plain SAS and then a message, too; and a
SAS in the DM while an answer streams there."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest

from tests.channels.matrix.test_verification import bot_device, squidd_cli
from tests.servers.element.client import ElementClient
from tests.servers.synapse.server import SynapseServer, User
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Gate, Reply
from tests.support.matrix_daemon import MatrixSquidd, dm_on_element
from tests.support.matrix_streams import answer_text

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

MakeElement = Callable[..., Any]
PREFIX = "m.key.verification."


class Raw:
    """Plain HTTP as `user`: to-device steps to one device of the bot, events into a room."""

    def __init__(self, synapse: SynapseServer, user: User, bot: User, device: str) -> None:
        self.synapse, self.user, self.bot, self.device = synapse, user, bot, device

    async def to_device(self, step: str, content: dict[str, Any]) -> None:
        path = f"/_matrix/client/v3/sendToDevice/{PREFIX}{step}/{uuid.uuid4().hex}"
        body = {"messages": {self.bot.user_id: {self.device: content}}}
        await anyio.to_thread.run_sync(self._call, path, body)

    async def in_room(self, room: str, kind: str, content: dict[str, Any]) -> str:
        path = f"/_matrix/client/v3/rooms/{quote(room)}/send/{kind}/{uuid.uuid4().hex}"
        sent = await anyio.to_thread.run_sync(self._call, path, content)
        return str(sent.get("event_id", ""))

    def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.synapse.call("PUT", path, body, token=self.user.access_token)


def start_content(txn: Any, device: Any, **overrides: Any) -> dict[str, Any]:
    content = {
        "transaction_id": txn,
        "from_device": device,
        "method": "m.sas.v1",
        "key_agreement_protocols": ["curve25519-hkdf-sha256"],
        "hashes": ["sha256"],
        "message_authentication_codes": ["hkdf-hmac-sha256.v2"],
        "short_authentication_string": ["decimal", "emoji"],
    }
    content.update(overrides)
    return content


def now_ms() -> int:
    return int(time.time() * 1000)


async def hostile_to_device(raw: Raw, her_device: str) -> None:
    """Steps of flows the bot never had, out of order, duplicated, of the wrong types."""
    mac = {"mac": {f"ed25519:{her_device}": "AAAA"}, "keys": "AAAA"}
    await raw.to_device("mac", {"transaction_id": "no-start", **mac})
    # A start from her real device (nio knows it: it made nio begin a flow of its own),
    # then a MAC before any key: the sequence that crashed the Matrix child.
    await raw.to_device("start", start_content("started", her_device))
    await raw.to_device("mac", {"transaction_id": "started", **mac})
    await raw.to_device("start", start_content("started", her_device))  # again
    await raw.to_device("cancel", {"transaction_id": "nowhere", "code": "m.user", "reason": "x"})
    request = {"from_device": her_device, "methods": ["m.sas.v1"], "timestamp": now_ms()}
    await raw.to_device("request", {"transaction_id": "keys-first", **request})
    await raw.to_device("key", {"transaction_id": "keys-first", "key": "not base64"})
    await raw.to_device("accept", {"transaction_id": "keys-first", "commitment": 5})
    await raw.to_device("done", {"transaction_id": "keys-first"})
    await raw.to_device("start", start_content("odd-method", her_device, method="m.qr.v9"))
    await raw.to_device("start", start_content("odd-hash", her_device, hashes=["md5"]))
    await raw.to_device("start", start_content(7, [her_device], hashes="sha256"))
    await raw.to_device("request", {"transaction_id": "typed", "methods": "m.sas.v1"})
    await raw.to_device("request", {"transaction_id": ["x"], "from_device": {}, "timestamp": "1"})
    await raw.to_device("key", {"transaction_id": "nowhere", "key": 12})
    await raw.to_device("mac", {"transaction_id": "nowhere", "mac": "x", "keys": []})
    await raw.to_device("unheard-of", {"transaction_id": "nowhere"})


async def hostile_in_room(raw: Raw, room: str, bot: User, her_device: str) -> None:
    """In the DM, where her own client reads them too: shapes it survives (a wrong type in
    a step makes matrix-js-sdk's Rust crypto throw out of its sync), flows that are none."""
    other = await raw.in_room(room, "m.reaction", {})  # an event that is no request
    relation = {"m.relates_to": {"rel_type": "m.reference", "event_id": other}}
    await raw.in_room(room, PREFIX + "mac", {"mac": {}, "keys": "AAAA", **relation})
    await raw.in_room(room, PREFIX + "start", {**start_content(None, her_device), **relation})
    await raw.in_room(room, PREFIX + "cancel", {"code": "m.user", "reason": "x", **relation})
    request = {
        "msgtype": PREFIX + "request",
        "body": "verify?",
        "to": bot.user_id,
        "from_device": her_device,
        "methods": ["m.qr_code.show.v1"],
    }
    await raw.in_room(room, "m.room.message", request)


async def sas(
    alice: ElementClient, bot: User, config: Path, device: str, room: str | None = None
) -> None:
    """Her Element verifies the bot by emoji (to-device, or in `room`); the operator
    confirms."""
    if room is None:
        flow = await alice.request_verification(bot.user_id, device_id=device)
    else:
        flow = await alice.request_verification(bot.user_id, room_id=room)
    await alice.wait_verification(flow_id=flow["flow_id"], phase="Ready")
    await alice.start_sas(flow["flow_id"])
    await alice.wait_verification(flow_id=flow["flow_id"], sas=True)
    confirmed = await squidd_cli(config, "matrix", "verify", "--yes")
    assert confirmed.returncode == 0, (confirmed.stdout, confirmed.stderr)
    await alice.confirm_sas(flow["flow_id"])
    done = await alice.wait_verification(flow_id=flow["flow_id"], phase="Done")
    assert done["cancel_code"] is None, done


async def answered(alice: ElementClient, bot: User, room: str, text: str) -> None:
    """She writes `text` in the DM and the bot's answer comes (after what it sent before)."""
    before = len(await alice.messages(room, bot.user_id))
    await alice.send_text(room, text)
    for count in range(before + 1, before + 20):
        replies = await alice.wait_messages(bot.user_id, room, count=count)
        if f"echo: {text}" in [r["body"] for r in replies[before:]]:
            return
    raise AssertionError(f"no answer to {text!r}: {replies[before:]}")


def assert_calm(daemon: DaemonProcess) -> None:
    assert daemon.proc.poll() is None
    assert daemon.count("child_crashed") == 0, daemon.log_text()[-3000:]
    errors = [e for e in daemon.events() if e.get("level") in ("error", "critical")]
    assert errors == [], errors


async def test_her_sas_verification_then_a_message_without_a_crash(
    bot: User, make_element: MakeElement, matrix_squidd: MatrixSquidd
) -> None:
    alice: ElementClient = await make_element("alice")
    config, daemon = await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await dm_on_element(alice, bot)
    device = await bot_device(alice, bot)

    await sas(alice, bot, config, device)
    await daemon.wait_event("matrix_verification_done")
    await answered(alice, bot, room, "after the verification")
    assert_calm(daemon)


async def test_hostile_verification_events_then_her_sas_and_a_message(
    synapse: SynapseServer,
    bot: User,
    make_user: Callable[[str], User],
    make_element: MakeElement,
    matrix_squidd: MatrixSquidd,
) -> None:
    her_account = make_user("alice")
    alice: ElementClient = await make_element("alice", her_account)
    stranger = make_user("mallory")
    config, daemon = await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await alice.create_dm(bot.user_id)
    await alice.wait_joined(room, bot.user_id)
    device = await bot_device(alice, bot)

    raw = Raw(synapse, her_account, bot, device)
    await hostile_to_device(raw, alice.device_id)
    await hostile_in_room(raw, room, bot, alice.device_id)
    intruder = Raw(synapse, stranger, bot, device)
    await hostile_to_device(intruder, "MALLORY")
    for n in range(60):  # a flood of requests from a stranger
        request = {"from_device": "MALLORY", "methods": ["m.sas.v1"], "timestamp": now_ms()}
        await intruder.to_device("request", {"transaction_id": f"flood-{n}", **request})
    await intruder.to_device("start", start_content("flood-start", "MALLORY"))

    await sas(alice, bot, config, device)
    await daemon.wait_event("matrix_verification_done")
    assert (await alice.wait_user_verified(bot.user_id))["verified"]
    await answered(alice, bot, room, "still there?")
    assert_calm(daemon)
    cancels = [e for e in daemon.events() if e.get("event") == "matrix_verification_cancel_sent"]
    to_her = {e["flow"]: e["code"] for e in cancels if e.get("user") == alice.user_id}
    assert to_her["no-start"] == "m.unknown_transaction", to_her
    assert to_her["started"] == "m.unexpected_message", to_her  # its MAC before the keys
    assert to_her["keys-first"] == "m.unexpected_message", to_her
    assert to_her["odd-method"] == to_her["odd-hash"] == "m.unknown_method", to_her
    to_stranger = [e for e in cancels if e.get("user") == stranger.user_id]
    assert [e["code"] for e in to_stranger] == ["m.user"], to_stranger  # not one per request


@pytest.mark.parametrize("where", ["to-device", "in-room"])
async def test_her_sas_while_a_turn_streams_in_the_dm_then_a_message(
    where: str, bot: User, make_element: MakeElement, fake_llm: FakeLLM, matrix_squidd: MatrixSquidd
) -> None:
    alice: ElementClient = await make_element("alice")
    config, daemon = await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await dm_on_element(alice, bot)
    device = await bot_device(alice, bot)
    story = answer_text(12)
    gate = Gate()
    fake_llm.push(Reply(content=story, gate=gate, gate_after=len(story) // 2))

    await alice.send_text(room, "a long story, please")
    assert await anyio.to_thread.run_sync(gate.reached.wait, 60), "the answer never streamed"
    [partial] = await alice.wait_messages(bot.user_id, room)  # the answer's first part
    assert partial["body"] and partial["body"] != story, partial
    await sas(alice, bot, config, device, room=room if where == "in-room" else None)
    gate.release.set()
    await daemon.wait_event("reply_sent")
    await daemon.wait_event("matrix_verification_done")
    assert (await alice.wait_user_verified(bot.user_id))["verified"]
    await answered(alice, bot, room, "and after the story?")
    assert_calm(daemon)
