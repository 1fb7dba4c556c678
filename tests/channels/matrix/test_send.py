"""A reply laid out as room events without a homeserver: its pieces, how each piece is
related to the message answered (in a thread or not), and the transaction ids that keep a
retried send from being doubled."""

from __future__ import annotations

from squidd.channels.matrix.send import pieces, relate, transaction_id
from squidd.core.models import Inbound, SessionId

ALICE = "@alice:example.org"
ROOM = "!room:example.org"


def _inbound(source_id: str = "$asked") -> Inbound:
    return Inbound("matrix", source_id, SessionId(ROOM), ALICE, "question?")


def test_an_empty_reply_still_says_something() -> None:
    assert [p["body"] for p in pieces("  \n", 1_000, "m.text")] == ["(empty reply)"]


def test_a_long_reply_is_split_into_pieces_that_each_fit_and_keep_every_word() -> None:
    words = [f"word{i}" for i in range(600)]
    contents = pieces(" ".join(words), 1_000, "m.notice")
    assert len(contents) > 1
    assert all(len(c["body"].encode()) <= 1_000 for c in contents)
    assert all(c["msgtype"] == "m.notice" for c in contents)
    assert " ".join(c["body"] for c in contents).split() == words


def test_outside_a_thread_only_the_first_piece_replies_and_mentions_the_sender() -> None:
    asked = _inbound()
    first = relate({"body": "a"}, 0, asked, None, "$asked")
    assert first["m.relates_to"] == {"m.in_reply_to": {"event_id": "$asked"}}
    assert first["m.mentions"] == {"user_ids": [ALICE]}
    second = relate({"body": "b"}, 1, asked, None, "$first")
    assert "m.relates_to" not in second
    assert second["m.mentions"] == {}


def test_inside_a_thread_every_piece_stays_in_it_replying_to_the_piece_before() -> None:
    asked = _inbound()
    first = relate({"body": "a"}, 0, asked, "$root", "$asked")
    assert first["m.relates_to"] == {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": False,
        "m.in_reply_to": {"event_id": "$asked"},
    }
    second = relate({"body": "b"}, 1, asked, "$root", "$first")
    assert second["m.relates_to"]["event_id"] == "$root"
    assert second["m.relates_to"]["is_falling_back"] is True
    assert second["m.relates_to"]["m.in_reply_to"] == {"event_id": "$first"}


def test_a_message_sent_unprompted_mentions_nobody_and_replies_to_nothing() -> None:
    content = relate({"body": "reminder"}, 0, None, None, None)
    assert "m.relates_to" not in content
    assert content["m.mentions"] == {}


def test_transaction_ids_repeat_for_the_same_reply_and_differ_otherwise() -> None:
    asked = _inbound()
    assert transaction_id(asked, 0, "a") == transaction_id(_inbound(), 0, "a")
    assert transaction_id(asked, 0, "a") != transaction_id(asked, 1, "a")
    assert transaction_id(asked, 0, "a") != transaction_id(asked, 0, "b")
    assert transaction_id(asked, 0, "a") != transaction_id(_inbound("$other"), 0, "a")
    # Nothing to be stable for: each unprompted send is new.
    assert transaction_id(None, 0, "a") != transaction_id(None, 0, "a")
