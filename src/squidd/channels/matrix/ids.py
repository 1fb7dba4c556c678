"""The Matrix ids that cross this channel's modules, typed so one cannot stand for another:
a room id (`!abc:example.org`), an event id (`$xyz`) and the sync position (`next_batch`),
which is saved only after every answered event of its batch was acknowledged."""

from __future__ import annotations

from typing import NewType

__all__ = ["EventId", "RoomId", "SyncToken"]

RoomId = NewType("RoomId", str)
EventId = NewType("EventId", str)
SyncToken = NewType("SyncToken", str)
