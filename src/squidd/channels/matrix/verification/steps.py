"""Which events are verification steps, and of which flow: a sync's to-device events and a
room's events read into `Step`s before `flows.Verifications` acts on them.

To-device, a step names its flow by `transaction_id`; a request older than 10 minutes (or
from the future) is stale and ignored. In a room, the request is an `m.room.message` of
msgtype `m.key.verification.request` addressed to the bot (the flow's id is its event id);
every later step refers to it (`m.relates_to`, `m.reference`) and counts only in the flow's
own room. The bot's own events, which come back in the timeline, are no steps. Whatever is
not shaped like a step (no sender, no content, no flow id) is left out here, silently:
anyone can send these events.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from squidd.channels.matrix.verification.flow import PREFIX, REQUEST, Flow, stale

__all__ = ["Step", "from_another", "room_step", "to_device_steps"]

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class Step:
    """One verification event: its type, sender, flow, content and room (None to-device)."""

    kind: str
    sender: str
    flow_id: str
    content: Mapping[str, Any]
    room: str | None


def to_device_steps(events: list[Any]) -> Iterator[Step]:
    """The verification steps of a sync's to-device list, in order."""
    for event in events:
        source = getattr(event, "source", None)
        if not isinstance(source, Mapping):
            continue
        kind = source.get("type")
        if not isinstance(kind, str) or not kind.startswith(PREFIX):
            continue
        content, sender = source.get("content"), source.get("sender")
        if not isinstance(content, Mapping) or not isinstance(sender, str):
            continue
        flow_id = content.get("transaction_id")
        if not isinstance(flow_id, str) or not flow_id:
            continue
        if kind == REQUEST and stale(content.get("timestamp")):
            log.info("matrix_verification_ignored", type=kind, reason="stale request")
            continue
        yield Step(kind, sender, flow_id, content, None)


def from_another(source: Mapping[str, Any], own_user_id: str) -> bool:
    """An in-room event shaped like a step and not the bot's own."""
    content, sender = source.get("content"), source.get("sender")
    return isinstance(content, Mapping) and isinstance(sender, str) and sender != own_user_id


def room_step(
    room_id: str, source: Mapping[str, Any], own_user_id: str, flows: Mapping[str, Flow]
) -> Step | None:
    """The step an in-room verification event is (`from_another` said so), or None: a
    request not to the bot or stale, a step of no flow of `flows` or of another room's."""
    content, sender = source["content"], source["sender"]
    if content.get("msgtype") == REQUEST:
        event_id = source.get("event_id")
        if content.get("to") != own_user_id or stale(source.get("origin_server_ts")):
            return None
        if isinstance(event_id, str) and event_id:
            return Step(REQUEST, sender, event_id, content, room_id)
        return None
    relates = content.get("m.relates_to")
    flow_id = relates.get("event_id") if isinstance(relates, Mapping) else None
    flow = flows.get(flow_id) if isinstance(flow_id, str) else None
    kind = source.get("type")
    if flow is not None and flow.room_id == room_id and isinstance(kind, str):
        return Step(kind, sender, flow.id, content, room_id)
    return None
