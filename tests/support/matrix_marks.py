"""A double of nio's client for the marks a bot puts on messages (typing, reactions,
redactions, read receipts): it records each request in order, answering as the homeserver
would, and `settle` lets the marks' tasks send what they queued (no time passes)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
from nio import RoomReadMarkersResponse, RoomRedactResponse, RoomSendResponse, RoomTypingResponse

__all__ = ["MarksClient", "settle"]


class MarksClient:
    """What the marks ask of nio's client, kept in order as (request, detail)."""

    def __init__(self) -> None:
        self.rooms: dict[str, Any] = {}
        self.olm = None
        self.requests: list[tuple[str, str]] = []
        self.response_callbacks: list[Any] = []

    def add_response_callback(self, func: Any, cb_filter: Any = None) -> None:
        self.response_callbacks.append(func)

    async def room_typing(
        self, room_id: str, typing_state: bool = True, timeout: int = 30000
    ) -> RoomTypingResponse:
        self.requests.append(("typing", "on" if typing_state else "off"))
        return RoomTypingResponse(room_id)

    async def room_send(
        self, room_id: str, event_type: str, content: dict[str, Any], **_: Any
    ) -> RoomSendResponse:
        relates = content["m.relates_to"]
        self.requests.append((f"react {relates['key']}", relates["event_id"]))
        return RoomSendResponse(f"$reaction{len(self.requests)}", room_id)

    async def room_redact(self, room_id: str, event_id: str) -> RoomRedactResponse:
        self.requests.append(("redact", event_id))
        return RoomRedactResponse(f"$redaction{len(self.requests)}", room_id)

    async def room_read_markers(self, room_id: str, **markers: str) -> RoomReadMarkersResponse:
        self.requests.append(("receipt", markers["read_event"]))
        return RoomReadMarkersResponse(room_id)


async def settle() -> None:
    """Let the marks' tasks send what they have queued (no time passes: nothing waits)."""
    for _ in range(50):
        await anyio.lowlevel.checkpoint()
