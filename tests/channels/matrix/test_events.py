"""A room event read into an `Inbound` (or refused) without a homeserver: the policy's
decision with the room's members and the bot's names, the reply fallback, the text cap, and
the thread relation copied only when it is a real event id."""

from __future__ import annotations

import unicodedata
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from nio import BadEvent, Event, MatrixRoom, RoomMemberEvent
from structlog.testing import capture_logs

from squidd.channels.matrix.events import (
    TRUNCATED_NOTE,
    is_text_message,
    own_join_index,
    read_message,
)
from squidd.channels.matrix.media import caption_and_name, media_content
from squidd.channels.matrix.policy import Policy
from squidd.core.models import Destination, SessionId

BOT = "@squidd:example.org"
ALICE = "@alice:example.org"
ROOM = "!room:example.org"


async def _ack() -> None:
    return None


def _message(content: dict[str, Any], *, sender: str = ALICE, event_id: str = "$m1") -> Any:
    return Event.parse_event(
        {
            "type": "m.room.message",
            "event_id": event_id,
            "sender": sender,
            "origin_server_ts": 1,
            "content": content,
        }
    )


def _room(*members: tuple[str, str]) -> MatrixRoom:
    room = MatrixRoom(ROOM, BOT)
    for user_id, name in members:
        room.add_member(user_id, name, None)
    return room


def _read(event: Any, room: MatrixRoom | None, *, max_text_chars: int = 1_000) -> Any:
    policy = Policy.build(
        BOT, allowed_users=[ALICE], allowed_servers=[], allowed_rooms=[], open_rooms=[]
    )
    return read_message(
        event,
        room_id=ROOM,
        room=room,
        own_user_id=BOT,
        names={"squidd"},
        policy=policy,
        max_text_chars=max_text_chars,
        ack=_ack,
    )


def test_a_direct_message_becomes_an_inbound_addressed_back_to_the_room() -> None:
    room = _room((BOT, "Squidd"), (ALICE, "Alice"))
    inbound = _read(_message({"msgtype": "m.text", "body": "hello"}), room)
    assert inbound is not None
    assert (inbound.channel, inbound.source_id, inbound.sender) == ("matrix", "$m1", ALICE)
    assert inbound.session_id == SessionId(ROOM)
    assert inbound.reply_to == Destination("matrix", ROOM)
    assert inbound.text == "hello"
    assert inbound.thread_root is None
    assert inbound.ack is _ack
    assert inbound.meta == {}  # nothing private to the channel travels with it


def test_a_group_room_is_answered_only_when_the_bot_is_named() -> None:
    room = _room((BOT, "Helper"), (ALICE, "Alice"), ("@bob:example.org", "Bob"))
    with capture_logs() as logs:
        assert _read(_message({"msgtype": "m.text", "body": "lunch?"}), room) is None
    assert logs[-1]["event"] == "matrix_message_ignored"
    assert logs[-1]["reason"] == "group room without mention"
    # The bot's display name in this room counts as its name, as does its localpart.
    for body in ("Helper, lunch?", "squidd: lunch?"):
        inbound = _read(_message({"msgtype": "m.text", "body": body}), room)
        assert inbound is not None, body


def test_a_sender_outside_the_allowlist_and_an_edit_are_not_answered() -> None:
    room = _room((BOT, "Squidd"), (ALICE, "Alice"))
    stranger = _message({"msgtype": "m.text", "body": "hi"}, sender="@eve:evil.example")
    assert _read(stranger, room) is None
    edit = _message(
        {
            "msgtype": "m.text",
            "body": "* hi",
            "m.relates_to": {"rel_type": "m.replace", "event_id": "$m0"},
        }
    )
    assert _read(edit, room) is None


def test_the_reply_fallback_is_stripped_unless_the_reply_is_only_a_thread_fallback() -> None:
    quoted = "> <@bob:example.org> earlier words\n\nmy answer"
    reply = {"m.in_reply_to": {"event_id": "$m0"}}
    inbound = _read(_message({"msgtype": "m.text", "body": quoted, "m.relates_to": reply}), None)
    assert inbound is not None
    assert inbound.text == "my answer"
    falling_back = {**reply, "rel_type": "m.thread", "event_id": "$root", "is_falling_back": True}
    inbound = _read(
        _message({"msgtype": "m.text", "body": quoted, "m.relates_to": falling_back}), None
    )
    assert inbound is not None
    assert inbound.text == quoted
    assert inbound.thread_root == "$root"


def test_a_long_message_is_cut_with_a_note_and_logged_as_truncated() -> None:
    with capture_logs() as logs:
        inbound = _read(_message({"msgtype": "m.text", "body": "x" * 50}), None, max_text_chars=10)
    assert inbound is not None
    assert inbound.text == "x" * 10 + TRUNCATED_NOTE
    received = [e for e in logs if e["event"] == "matrix_message_received"]
    assert received[0]["chars"] == 50
    assert received[0]["truncated"] is True


def test_a_thread_root_that_is_no_event_id_is_not_copied() -> None:
    for junk in (42, {"a": 1}, "not-an-id", "$" + "a" * 300):
        relates = {"rel_type": "m.thread", "event_id": junk}
        inbound = _read(
            _message({"msgtype": "m.text", "body": "hi", "m.relates_to": relates}), None
        )
        assert inbound is not None
        assert inbound.thread_root is None, junk


def test_a_message_nio_refused_over_an_optional_field_is_still_a_text_message() -> None:
    source = {
        "type": "m.room.message",
        "event_id": "$m1",
        "sender": ALICE,
        "origin_server_ts": 1,
        "content": {"msgtype": "m.text", "body": "hi", "formatted_body": 7},
    }
    refused = Event.parse_event(source)
    assert isinstance(refused, BadEvent)
    assert is_text_message(refused)
    image = _message({"msgtype": "m.image", "body": "cat.png", "url": "mxc://x/y"})
    assert not is_text_message(image)


def test_the_timeline_before_the_bot_joined_is_found() -> None:
    def member(user_id: str, membership: str, prev: str | None) -> Any:
        unsigned = {"prev_content": {"membership": prev}} if prev else {}
        return Event.parse_event(
            {
                "type": "m.room.member",
                "event_id": f"${user_id}{membership}",
                "sender": user_id,
                "state_key": user_id,
                "origin_server_ts": 1,
                "content": {"membership": membership},
                "unsigned": unsigned,
            }
        )

    timeline = [
        _message({"msgtype": "m.text", "body": "old"}),
        member(BOT, "join", "invite"),
        _message({"msgtype": "m.text", "body": "new"}, event_id="$m2"),
    ]
    assert isinstance(timeline[1], RoomMemberEvent)
    assert own_join_index(timeline, BOT) == 1
    # A profile change of a member who was already in is no join.
    assert own_join_index([member(BOT, "join", "join")], BOT) is None
    assert own_join_index(timeline, ALICE) is None


# --- every string of an event is valid text before anything reads it -------------------

# Any code point: lone surrogates (a JSON `\ud800` in an encrypted body the homeserver could
# not check), NUL and other control characters included.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=200)


def _valid(text: str) -> bool:
    text.encode("utf-8")  # raises on a lone surrogate
    return not any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in text)


@given(body=ANY_TEXT, name=ANY_TEXT)
def test_any_body_and_display_name_reach_the_inbound_as_valid_text(body: str, name: str) -> None:
    room = _room((BOT, "Squidd"), (ALICE, name))
    inbound = _read(_message({"msgtype": "m.text", "body": body}), room)
    assert inbound is not None
    assert _valid(inbound.text)


def test_surrogates_nul_and_controls_are_cleaned_in_body_and_names() -> None:
    room = _room((BOT, "Squ\x00iddy"), (ALICE, "Al\x1b[31mice\ud800"))
    body = "Squiddy: hi \ud800 the\x00re\x07 \ud83d\ude00"
    with capture_logs() as logs:
        inbound = _read(_message({"msgtype": "m.text", "body": body}), room)
    assert inbound is not None
    assert inbound.text == "Squiddy: hi \ufffd there \U0001f600"
    for entry in logs:
        assert all(_valid(v) for v in entry.values() if isinstance(v, str)), entry


def test_a_sender_id_that_is_not_valid_text_is_not_answered() -> None:
    """Cleaning must not turn a forged id into an allowed one: `@ali\\x00ce` is no one."""
    room = _room((BOT, "Squidd"), (ALICE, "Alice"))
    for forged in ("@ali\x00ce:example.org", "@alice\ud800:example.org", "@alice:example.org\x1b"):
        with capture_logs() as logs:
            assert _read(_message({"msgtype": "m.text", "body": "hi"}, sender=forged), room) is None
        assert logs[-1]["reason"] == "malformed sender"
        assert _valid(logs[-1]["sender"])


def test_a_media_message_names_its_file_in_valid_text() -> None:
    event = _message(
        {
            "msgtype": "m.file",
            "body": "see \ud800 this\x00",
            "filename": "re\x1bport\ud800\x00.pdf",
            "url": "mxc://example.org/abc",
            "info": {"mimetype": "application/pdf\x00", "size": 10},
        }
    )
    content = media_content(event)
    assert content is not None
    assert caption_and_name(content) == ("see \ufffd this", "report\ufffd.pdf")
    assert content["info"]["mimetype"] == "application/pdf"
