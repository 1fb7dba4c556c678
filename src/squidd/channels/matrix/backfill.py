"""A room's gap filled in: the events between the previous sync position and the start of
a `limited` timeline, fetched with `/messages` (backwards, page by page) so nothing in a
gap is skipped. At most `BACKFILL_MAX_PAGES` pages of `BACKFILL_PAGE` events are read (a
longer gap is logged as truncated); the events come back oldest first.
"""

from __future__ import annotations

from typing import Any

import structlog
from nio import AsyncClient, ErrorResponse, MessageDirection, RoomMessagesResponse

from squidd.channels.matrix.client import call, translate
from squidd.channels.matrix.ids import RoomId, SyncToken
from squidd.errors import TransientError

__all__ = ["BACKFILL_MAX_PAGES", "BACKFILL_PAGE", "backfill"]

log = structlog.get_logger()

BACKFILL_PAGE = 100
BACKFILL_MAX_PAGES = 50


async def backfill(
    client: AsyncClient, room_id: RoomId, prev_batch: str, since: SyncToken
) -> list[Any]:
    """The events between the previous position and the start of a limited timeline."""
    collected: list[Any] = []
    start = prev_batch
    for _ in range(BACKFILL_MAX_PAGES):
        response = await call(
            "back-filling a room",
            client.room_messages(
                room_id,
                start=start,
                end=since,
                direction=MessageDirection.back,
                limit=BACKFILL_PAGE,
            ),
        )
        if isinstance(response, ErrorResponse):
            raise translate("back-filling a room", response)
        if not isinstance(response, RoomMessagesResponse):
            raise TransientError(f"back-fill: unexpected answer {type(response).__name__}")
        collected.extend(response.chunk)
        if not response.chunk or not response.end or response.end == start:
            break
        start = response.end
    else:
        log.warning("matrix_backfill_truncated", room=room_id, events=len(collected))
    collected.reverse()
    log.info("matrix_backfilled", room=room_id, events=len(collected))
    return collected
