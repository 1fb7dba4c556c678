"""Streaming by edits without a homeserver: the pacing, the edit's shape, the transaction
ids, the record of the streamed message, and a partial reply whose sends fail."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from squidd.channels.matrix import MatrixChannel
from squidd.channels.matrix.online import Online
from squidd.channels.matrix.stream import (
    Pacer,
    ReplyStream,
    StreamRecord,
    StreamRecords,
    edit_content,
    stream_transaction_id,
)
from squidd.config.matrix import MatrixSettings
from squidd.core.models import ChannelName, Destination, Inbound, SessionId, SourceId
from squidd.errors import DeliveryError

pytestmark = pytest.mark.anyio


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def pacer(**overrides: Any) -> tuple[Pacer, FakeMonotonic]:
    clock = FakeMonotonic()
    return Pacer(MatrixSettings(**overrides), clock), clock


def test_a_few_quick_edits_then_one_every_interval() -> None:
    paced, clock = pacer()
    assert not paced.due(199, first=True)  # a short answer goes out once, at the end
    assert paced.due(200, first=True)
    paced.sent(first=True)
    sent_at = []
    for tick in range(120):  # a minute of deltas, one every half second
        clock.advance(0.5)
        if paced.due(100, first=False):
            paced.sent(first=False)
            sent_at.append((tick + 1) * 0.5)
    assert sent_at[:3] == [1.0, 2.0, 3.0]
    later = sent_at[2:]
    gaps = [b - a for a, b in itertools.pairwise(later)]
    assert gaps and all(gap >= 5.0 for gap in gaps)
    # Synapse's rc_message: 0.2/s after a burst of 10 -- never more events than it allows.
    for i, at in enumerate([0.0, *sent_at]):
        assert i + 1 <= 10 + 0.2 * at


def test_the_edit_cap_and_the_size_limit_stop_partial_edits() -> None:
    paced, clock = pacer(stream_max_edits=2, stream_max_chars=500)
    paced.sent(first=True)
    clock.advance(10)
    assert not paced.due(501, first=False)  # over the size limit: waits for the final edit
    assert paced.due(500, first=False)
    for _ in range(2):
        paced.sent(first=False)
        clock.advance(10)
    assert not paced.due(10, first=False)


def test_an_edit_replaces_with_new_content_and_a_star_fallback() -> None:
    new = {
        "msgtype": "m.text",
        "body": "a **b**",
        "format": "org.matrix.custom.html",
        "formatted_body": "<p>a <strong>b</strong></p>",
        "m.relates_to": {"m.in_reply_to": {"event_id": "$asked"}},
        "m.mentions": {"user_ids": ["@alice:x"]},
    }
    edit = edit_content(new, "$first")
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$first"}
    assert edit["body"] == "* a **b**"
    assert edit["formatted_body"] == "* <p>a <strong>b</strong></p>"
    assert "m.relates_to" not in edit["m.new_content"]
    assert edit["m.new_content"]["body"] == "a **b**"
    assert edit["m.mentions"] == {}


def test_transaction_ids_follow_the_turn_and_the_step() -> None:
    assert stream_transaction_id("matrix:$a", "first") == stream_transaction_id(
        "matrix:$a", "first"
    )
    ids = {
        stream_transaction_id(k, s) for k in ("matrix:$a", "matrix:$b") for s in ("first", "edit-1")
    }
    assert len(ids) == 4


async def test_records_survive_and_unreadable_ones_count_as_none(tmp_path: Path) -> None:
    records = StreamRecords(tmp_path)
    assert await records.get("matrix:$a") is None
    await records.put("matrix:$a", StreamRecord("!r:x", "$first"))
    assert await StreamRecords(tmp_path).get("matrix:$a") == StreamRecord("!r:x", "$first")
    next(iter((tmp_path / "streams").glob("*.json"))).write_text("{not json")
    assert await records.get("matrix:$a") is None
    await records.remove("matrix:$a")
    await records.remove("matrix:$a")


async def test_a_stream_resumes_the_recorded_message_and_stops_when_a_send_fails(
    tmp_path: Path,
) -> None:
    records = StreamRecords(tmp_path)
    await records.put("matrix:$a", StreamRecord("!r:x", "$before-the-crash"))
    paced, clock = pacer()
    sent: list[tuple[dict[str, Any], str]] = []
    fail = False

    async def send(content: dict[str, Any], tx_id: str) -> str:
        if fail:
            raise DeliveryError("429")
        sent.append((content, tx_id))
        return "$new"

    stream = ReplyStream(
        key="matrix:$a",
        room_id="!r:x",
        records=records,
        pacer=paced,
        render=lambda text: {"msgtype": "m.text", "body": text},
        send_first=send,
        send_edit=send,
    )
    await stream.text("Hello")
    assert stream.event_id == "$before-the-crash"
    [(content, tx_id)] = sent  # not a new message: an edit of the recorded one
    assert content["m.relates_to"]["event_id"] == "$before-the-crash"
    assert tx_id == stream_transaction_id("matrix:$a", "edit-1")
    fail = True
    clock.advance(2)
    await stream.text("Hello world")  # raises nothing: the turn goes on
    fail = False
    clock.advance(10)
    await stream.text("Hello world, again")
    assert len(sent) == 1  # stopped after the failure; the final edit comes with the reply


class _Room:
    def __init__(self, members: int) -> None:
        self.joined_count = members


class _Client:
    def __init__(self) -> None:
        self.rooms = {"!dm:x": _Room(2), "!group:x": _Room(5)}


class _Connected:
    """A connection as the channel's `Online` sees it: only its client is asked for here."""

    def __init__(self) -> None:
        self.client: Any = _Client()
        self.policy: Any = None
        self.signing = None

    def apply_trust(self) -> None:
        return None


def _asked(room: str) -> Inbound:
    return Inbound(
        channel=ChannelName("matrix"),
        source_id=SourceId("$asked"),
        session_id=SessionId(room),
        sender="@alice:x",
        text="hi",
        reply_to=Destination(ChannelName("matrix"), room),
    )


@pytest.mark.parametrize(
    ("overrides", "streamed"),
    [
        ({}, {"!dm:x"}),  # default: direct chats stream, group rooms do not
        ({"streaming": "edits"}, {"!dm:x", "!group:x"}),
        ({"streaming": "off"}, set()),
        ({"room_streaming": {"!group:x": "edits", "!dm:x": "off"}}, {"!group:x"}),
    ],
)
def test_where_answers_stream(
    tmp_path: Path, overrides: dict[str, Any], streamed: set[str]
) -> None:
    settings = MatrixSettings(homeserver="http://127.0.0.1:1", user_id="@bot:x", **overrides)
    online = Online()
    channel = MatrixChannel(settings, tmp_path, online=online)
    with online.serving(_Connected()):
        rooms = {room for room in ("!dm:x", "!group:x") if channel.partials(_asked(room))}
    assert rooms == streamed
