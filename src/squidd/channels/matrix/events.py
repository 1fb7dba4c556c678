"""One room event read into an `Inbound`, or into the reason it is not answered.

Pure reading, no I/O: every string of the content made valid text (`clean_data`) before
anything reads it, and a sender id that is not valid text refused; which events are text
messages we can answer (including ones nio refused over an optional field), the policy's
decision, the reply fallback stripped, the text capped at `max_text_chars` (with a note
that the model sees only the beginning), and only a relation the spec types as an event id
copied into the thread root. Kept apart from the sync loop so every rule here is testable
without a homeserver.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from nio import (
    BadEvent,
    MatrixRoom,
    RoomMemberEvent,
    RoomMessageEmote,
    RoomMessageNotice,
    RoomMessageText,
)

from squidd.channels.matrix.ids import EventId, RoomId
from squidd.channels.matrix.policy import Policy, command_text
from squidd.channels.matrix.render import strip_reply_fallback
from squidd.core.models import AckHook, Destination, Inbound, SessionId, SourceId
from squidd.text import clean_data, clean_text

log = structlog.get_logger()

TRUNCATED_NOTE = "\n[... truncated: the message is longer than what is shown here]"
# An event id as the spec types it: `$` and printable ASCII (the opaque ids of old room
# versions, url-safe base64 hashes of newer ones), at most 255 bytes.
_EVENT_ID_RE = re.compile(r"\$[\x21-\x7e]{1,254}")


def read_message(
    event: Any,
    *,
    room_id: RoomId,
    room: MatrixRoom | None,
    own_user_id: str,
    names: set[str],
    policy: Policy,
    max_text_chars: int,
    ack: AckHook,
) -> Inbound | None:
    """The `Inbound` for a text message the policy answers, else None (logged with why)."""
    # Every string of the event is made valid text before anything reads it (the policy
    # included); ids are checked, not changed: one that cleaning would alter is not an id.
    raw_content = event.source.get("content")
    content: Mapping[str, Any] = clean_data(raw_content) if isinstance(raw_content, dict) else {}
    relates = content.get("m.relates_to")
    relates = relates if isinstance(relates, Mapping) else {}
    sender: str = event.sender
    if clean_text(sender) != sender:
        log.info("matrix_message_ignored", sender=clean_text(sender), reason="malformed sender")
        return None
    if relates.get("rel_type") == "m.replace":
        log.debug("matrix_message_ignored", sender=sender, reason="edit")
        return None
    members = member_count(room)
    names = {clean_text(name) for name in names}
    if room is not None and own_user_id in room.users:
        names.add(clean_text(room.user_name(own_user_id) or ""))
    decision = policy.decide(
        room_id=room_id,
        sender=sender,
        msgtype=str(content.get("msgtype", "")),
        content=content,
        member_count=members,
        display_names=names,
    )
    if not decision.answer:
        log.debug("matrix_message_ignored", sender=sender, reason=decision.reason)
        return None
    body = content.get("body")
    text = body if isinstance(body, str) else ""
    in_reply_to = relates.get("m.in_reply_to")
    if isinstance(in_reply_to, Mapping) and relates.get("is_falling_back") is not True:
        text = strip_reply_fallback(text)
    full_chars = len(text)
    if full_chars > max_text_chars:
        # One huge message would ride along in every request of the room until the next
        # consolidation; the model is told it sees only the beginning.
        text = text[:max_text_chars].rstrip() + TRUNCATED_NOTE
    # Only what the spec types it as is copied into the reply's relation.
    thread_root = (
        event_id_or_none(relates.get("event_id")) if relates.get("rel_type") == "m.thread" else None
    )
    log.info(
        "matrix_message_received",
        sender=sender,
        chars=full_chars,
        truncated=full_chars > max_text_chars,
        reason=decision.reason,
        encrypted=bool(room is not None and room.encrypted),
    )
    return Inbound(
        channel=policy.channel,
        source_id=SourceId(event.event_id),
        session_id=SessionId(
            policy.session_of(room_id, direct=members <= 2, thread_root=thread_root)
        ),
        sender=sender,
        text=text,
        reply_to=Destination(policy.channel, room_id),
        thread_root=thread_root,
        ack=ack,
        command=command_text(text, own_user_id, names),
        group=members > 2,
    )


def event_id_or_none(value: Any) -> str | None:
    """`value` if it is an event id the spec allows, else None (a `42`, an object, junk)."""
    if isinstance(value, str) and _EVENT_ID_RE.fullmatch(value):
        return value
    return None


def is_text_message(event: Any) -> bool:
    """A text message we can answer: a valid one, or one nio refused over an optional field
    (a non-string `formatted_body`) whose `body` is a proper string."""
    if isinstance(event, RoomMessageText | RoomMessageEmote | RoomMessageNotice):
        return True
    if not isinstance(event, BadEvent):
        return False
    source = event.source if isinstance(event.source, Mapping) else {}
    content = source.get("content")
    return (
        source.get("type") == "m.room.message"
        and isinstance(content, Mapping)
        and content.get("msgtype") in ("m.text", "m.emote", "m.notice")
        and isinstance(content.get("body"), str)
        and isinstance(event.sender, str)
        and isinstance(event.event_id, str)
    )


def event_id(event: Any) -> EventId:
    """The event's id, from nio's field or its raw source; "" when it has none."""
    value = getattr(event, "event_id", None)
    if not value:
        source = getattr(event, "source", None)
        if isinstance(source, Mapping):
            value = source.get("event_id")
    return EventId(value if isinstance(value, str) else "")


def event_type(event: Any) -> str:
    source = getattr(event, "source", None)
    if isinstance(source, Mapping):
        return str(source.get("type", "?"))
    return type(event).__name__


def bad_reason(event: Any) -> str:
    return str(getattr(event, "error", "") or type(event).__name__)


def own_join_index(events: Sequence[Any], user_id: str) -> int | None:
    """Where `user_id` joined in `events` (a timeline), or None if it did not join there."""
    for index, event in enumerate(events):
        if (
            isinstance(event, RoomMemberEvent)
            and event.state_key == user_id
            and event.membership == "join"
            and event.prev_membership != "join"
        ):
            return index
    return None


def member_count(room: MatrixRoom | None) -> int:
    if room is None:
        return 2
    count: int = room.joined_count
    return max(count, 1)
