"""Hostile or odd input on a real homeserver: a 60 KB message, broken HTML, an unknown event
type, a user id full of path characters. Nothing crashes, nothing is written outside the
data dir, and the log says what happened."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.servers.synapse.server import SynapseServer, User
from tests.support.matrix import bot_settings
from tests.support.matrix_channel import run_channel

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


async def test_bad_input_is_survived(
    synapse: SynapseServer,
    bot: User,
    make_human: MakeHuman,
    tmp_path: Path,
    uid: str,
) -> None:
    alice = await make_human("alice")
    # A legal (historical-grammar) localpart that looks like a path.
    traveller_user = synapse.register(f"../../etc/passwd-{uid}", password="pw-traveller")
    # Deeply nested, so a "../.." escape from any file the channel writes lands in `jail`.
    jail = tmp_path / "jail"
    data_dir = jail / "x" / "y" / "data"
    data_dir.mkdir(parents=True)
    outside_before = _files(jail) - _files(data_dir)
    # The cap on inbound text is lifted: the 60 KB echo exercises the splitting of replies.
    settings = bot_settings(
        synapse,
        bot,
        allowed_users=[alice.user_id, traveller_user.user_id],
        max_text_chars=100_000,
    )
    big = "\n".join(f"line {i:05d} " + "x" * 50 for i in range(1000))  # ~60 KB
    assert len(big.encode()) >= 60_000

    with capture_logs() as logs:
        async with run_channel(settings, data_dir) as (_channel, inbox):
            room = await alice.create_room([bot.user_id, traveller_user.user_id], name="odd")
            await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")
            unknown = await alice.send_event(room, "org.example.unknown", {"weird": [1, {}]})
            broken = await alice.send(
                room,
                f"{bot.user_id} broken <b>html",
                format="org.matrix.custom.html",
                formatted_body="<b><i>unclosed <script>alert(1)</scr",
            )
            huge = await alice.send(room, f"{bot.user_id}\n{big}")
            await alice.wait_for(lambda: alice.replies_to(bot.user_id, broken), "broken reply")
            await alice.wait_for(lambda: alice.replies_to(bot.user_id, huge), "huge reply")

            # The user id full of path characters talks to the bot too.
            traveller = await make_human("traveller", traveller_user)
            await traveller.join(room)
            odd = await traveller.send(room, f"{bot.user_id} hello from a path")
            await alice.wait_for(lambda: alice.replies_to(bot.user_id, odd), "odd reply")

    # The 60 KB echo came back split into several events, each well under the 64 KiB cap,
    # and nothing was lost on the way.
    echo_of_huge = [
        s for s in alice.from_sender(bot.user_id, room) if "line " in s.content.get("body", "")
    ]
    assert len(echo_of_huge) >= 2
    for piece in echo_of_huge:
        assert len(json.dumps(piece.event.source).encode()) < 65_536
    joined = "".join(p.content["body"] for p in echo_of_huge)
    for i in (0, 499, 999):
        assert f"line {i:05d}" in joined
    # Broken HTML: answered from the plain body.
    assert [r.content["body"] for r in alice.replies_to(bot.user_id, broken)] == [
        f"echo: {bot.user_id} broken <b>html"
    ]
    # The unknown event was logged and ignored.
    assert unknown not in [m.source_id for m in inbox.received]
    assert any(
        e.get("event") == "matrix_event_ignored" and e.get("type") == "org.example.unknown"
        for e in logs
    )
    # No file appeared outside the data dir; none inside is named after a user.
    assert _files(jail) - _files(data_dir) == outside_before
    for path in _files(data_dir):
        assert "passwd" not in path.name
        assert path.resolve().is_relative_to(data_dir.resolve())
