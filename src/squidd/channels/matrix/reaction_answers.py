"""A reaction a person sends (incoming) that may answer an approval question, read into an
`Inbound`. The reactions the bot itself puts on events are `own_reactions`.

The approval prompt (gateway/approval_answers.py) can be answered with a reaction: ✅ once,
♾️ always, ❌ no. Such a reaction from a sender the policy lets in, in a room it allows
(no mention needed: a reaction cannot mention), becomes an `Inbound` of kind `REACTION`
whose text is the key; the pipeline's approval stage takes it as the answer to the one question
waiting in the room, or drops it. Every other reaction is ignored, as before.
"""

from __future__ import annotations

from typing import Any

import structlog
from nio import MatrixRoom, ReactionEvent

from squidd.channels.matrix.events import member_count
from squidd.channels.matrix.ids import RoomId
from squidd.channels.matrix.policy import Policy
from squidd.core.models import AckHook, Destination, Inbound, InboundKind, SessionId, SourceId
from squidd.text import clean_text

log = structlog.get_logger()

__all__ = ["ANSWER_KEYS", "is_answer_reaction", "read_reaction"]

# ♾️ is sent with and without its variation selector.
ANSWER_KEYS = frozenset({"✅", "♾️", "♾", "❌"})


def is_answer_reaction(event: Any) -> bool:
    return (
        isinstance(event, ReactionEvent)
        and isinstance(event.key, str)
        and event.key in ANSWER_KEYS
        and isinstance(event.sender, str)
        and isinstance(event.event_id, str)
    )


def read_reaction(
    event: ReactionEvent,
    *,
    room_id: RoomId,
    room: MatrixRoom | None,
    own_user_id: str,
    policy: Policy,
    ack: AckHook,
    **_: Any,
) -> Inbound | None:
    """The `Inbound` for an answer reaction the policy lets in, else None."""
    sender: str = event.sender
    if sender == own_user_id or clean_text(sender) != sender:
        return None
    if not policy.user_allowed(sender):
        log.debug("matrix_reaction_ignored", sender=sender, reason="sender not allowlisted")
        return None
    if not policy.room_allowed(room_id, direct=member_count(room) <= 2):
        log.debug("matrix_reaction_ignored", sender=sender, reason="room not allowlisted")
        return None
    log.info("matrix_reaction_received", sender=sender, key=event.key)
    return Inbound(
        channel=policy.channel,
        source_id=SourceId(event.event_id),
        session_id=SessionId(room_id),
        sender=sender,
        text=event.key,
        reply_to=Destination(policy.channel, room_id),
        ack=ack,
        kind=InboundKind.REACTION,
    )
