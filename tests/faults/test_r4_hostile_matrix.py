"""Fault suite R4, Matrix: 60 KB messages and shapeless events (wrongly typed body, msgtype
and relations, missing content, huge ids, NUL, lone surrogates, garbage encrypted events)
sent through a real homeserver to a running `squidd run`: the daemon stays up, logs no
error line, answers each well-formed message once and any shapeless one at most once
(what the homeserver itself refuses is counted, not sent)."""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import Counts
from tests.servers.synapse.server import SynapseError, SynapseServer, User
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM
from tests.support.matrix_daemon import matrix_daemon_config

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

MakeHuman = Callable[..., Any]
HUGE_ID = "$" + "x" * 10_000

# (name, event type, content, answered): answered is True for a message the bot must answer.
CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    ("60kb", "m.room.message", {"msgtype": "m.text", "body": "a" * 60_000}, True),
    ("nul", "m.room.message", {"msgtype": "m.text", "body": "nul \x00 in it"}, True),
    ("surrogate", "m.room.message", {"msgtype": "m.text", "body": "lone \ud800 half"}, True),
    ("body-int", "m.room.message", {"msgtype": "m.text", "body": 5}, False),
    ("body-list", "m.room.message", {"msgtype": "m.text", "body": ["a"]}, False),
    ("body-none", "m.room.message", {"msgtype": "m.text", "body": None}, False),
    ("msgtype-list", "m.room.message", {"msgtype": ["m.text"], "body": "x"}, False),
    ("msgtype-int", "m.room.message", {"msgtype": 1, "body": "x"}, False),
    ("no-content", "m.room.message", {}, False),
    ("rel-str", "m.room.message", {"msgtype": "m.text", "body": "r", "m.relates_to": "x"}, True),
    (
        "rel-huge",
        "m.room.message",
        {
            "msgtype": "m.text",
            "body": "h",
            "m.relates_to": {"rel_type": "m.thread", "event_id": HUGE_ID},
        },
        True,
    ),
    (
        "reply-huge",
        "m.room.message",
        {
            "msgtype": "m.text",
            "body": "q",
            "m.relates_to": {"m.in_reply_to": {"event_id": HUGE_ID}},
        },
        True,
    ),
    ("rel-list", "m.room.message", {"msgtype": "m.text", "body": "l", "m.relates_to": [1]}, True),
    (
        "enc-garbage",
        "m.room.encrypted",
        {
            "algorithm": "m.megolm.v1.aes-sha2",
            "ciphertext": "garbage",
            "session_id": "s",
            "sender_key": "k",
            "device_id": "D",
        },
        False,
    ),
    ("enc-int", "m.room.encrypted", {"algorithm": 5, "ciphertext": {}}, False),
    ("enc-empty", "m.room.encrypted", {}, False),
    (
        "olm-garbage",
        "m.room.encrypted",
        {"algorithm": "m.olm.v1.curve25519-aes-sha2", "ciphertext": "nope", "sender_key": 1},
        False,
    ),
]


def _send_raw(synapse: SynapseServer, token: str, room: str, kind: str, content: Any) -> str:
    result = synapse.call(
        "PUT",
        f"/_matrix/client/v3/rooms/{room}/send/{kind}/{uuid.uuid4().hex}",
        content,
        token=token,
    )
    event_id: str = result["event_id"]
    return event_id


async def test_hostile_matrix_events_to_a_running_daemon(
    synapse: SynapseServer,
    bot: User,
    make_human: MakeHuman,
    tmp_path: Path,
    fake_llm: FakeLLM,
) -> None:
    alice = await make_human("alice")
    room = await alice.create_room([bot.user_id], direct=True)
    synapse.call("POST", f"/_matrix/client/v3/join/{room}", {}, token=bot.access_token)
    config = matrix_daemon_config(tmp_path, fake_llm, synapse, bot, alice.user_id)
    daemon = DaemonProcess(config, tmp_path / "squidd.log")
    try:
        await daemon.wait_event("matrix_connected")
        sent: dict[str, tuple[str, bool]] = {}
        token = alice.user.access_token
        refused = 0
        for name, kind, content, answered in CASES:
            try:
                sent[_send_raw(synapse, token, room, kind, content)] = (name, answered)
            except SynapseError:
                refused += 1  # the homeserver's own validation stops it before the bot
                print(f"R4 matrix: the homeserver refused {name}")
        sentinel = await alice.send(room, "sentinel")
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, sentinel), "sentinel", 90)
        must = [e for e, (_, a) in sent.items() if a]
        await alice.wait_for(
            lambda: all(alice.replies_to(bot.user_id, e) for e in must), "answers", 90
        )
        answers = Counter({e: len(alice.replies_to(bot.user_id, e)) for e in sent})
        events = daemon.events()
        errors = [e for e in events if e.get("level") in ("error", "critical")]
        counts = Counts("R4 matrix", extra={"inputs": len(sent)})
        counts.tally(must, answers)
        counts.crashes = (daemon.proc.poll() is not None) + sum(
            e.get("event") == "turn_crashed" for e in events
        )
        counts.extra["refused_by_homeserver"] = refused
        counts.extra["silent"] = sum(1 for e in sent if answers[e] == 0)
        counts.report()
        assert counts.lost == 0 and counts.duplicates == 0 and counts.crashes == 0
        assert all(n <= 1 for n in answers.values()), answers
        assert errors == [], errors[:3]
        assert len(alice.replies_to(bot.user_id, sentinel)) == 1
    finally:
        if daemon.proc.poll() is None:
            await daemon.stop(signal.SIGKILL)
