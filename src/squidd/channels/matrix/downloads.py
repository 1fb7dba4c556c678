"""Media downloads off the sync loop: one lane per room, a bounded number of downloads at once.

The sync loop accepts a media message like any message -- its event id joins its batch's
pending set in the `SyncLedger` at once, so the persisted position never passes it -- but
the file is fetched by the room's lane, not by the loop: a large file in one room no longer
delays the next sync or any other room's messages. At most `limit` files download at once
across all rooms; the size cap and the streaming into the media store are `media.fetch`'s.

Per room (one session) messages reach the inbox in timeline order: while a room's lane holds
anything, every later message of that room (a text too) queues behind it; a room with an
empty lane is handed on directly by the loop. A message handed on is acknowledged by the
router's ack, like any text, and only then does the ledger let the position move past it.

When the connection ends mid-download, the lane's messages not yet handed on are dropped and
forgotten from the run's seen-ids: the position was not saved past them, so the next
connection (or, after a restart, the next run) receives and hands them on again. Nothing is
lost, and as they never reached the inbox nothing is answered twice.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus
from nio import AsyncClient

from squidd.channels.matrix import media
from squidd.channels.matrix.ids import EventId, RoomId
from squidd.core.models import Inbound
from squidd.core.ports import MediaSink
from squidd.errors import SquiddError

log = structlog.get_logger()

DOWNLOADS_AT_ONCE = 3

# (room id, message) -> handed to the inbox.
HandOn = Callable[[RoomId, Inbound], Awaitable[None]]
# (message, media content) -> the message with its file fetched (or the note why not).
Fetch = Callable[[Inbound, Mapping[str, Any]], Awaitable[Inbound]]


async def with_media(
    client: AsyncClient,
    inbound: Inbound,
    content: Mapping[str, Any],
    *,
    sink: MediaSink | None,
    max_bytes: int,
) -> Inbound:
    """The message with its file: fetched into the media store, the caption as text."""
    caption, _ = media.caption_and_name(content)
    if sink is None:
        kind = media.KINDS[str(content["msgtype"])]
        return replace(inbound, text=caption or f"[{kind}: {inbound.text}] (not downloaded)")
    attachment = await media.fetch(
        client, content, sink=sink, session_id=inbound.session_id, max_bytes=max_bytes
    )
    return replace(inbound, text=caption or media.label(attachment), attachments=(attachment,))


@dataclass(slots=True)
class _Item:
    inbound: Inbound
    content: Mapping[str, Any] | None  # a media message's: its file is fetched first
    handing: bool = False  # the inbox was asked to take it: it counts as handed on


class Lanes:
    """The rooms' queues of messages waiting behind a download, and their worker tasks.

    `run` owns the workers for one connection; `failure` is the channel error a worker met
    (the store failing, say), after `on_failure` (given at construction) was called to end the
    connection.
    """

    def __init__(
        self,
        hand_on: HandOn,
        fetch: Fetch,
        *,
        forget: Callable[[EventId], None],
        on_failure: Callable[[], None],
        limit: int = DOWNLOADS_AT_ONCE,
    ) -> None:
        self._hand_on = hand_on
        self._fetch = fetch
        self._forget = forget
        self._limiter = anyio.CapacityLimiter(limit)
        self._lanes: dict[str, deque[_Item]] = {}
        self._tg: TaskGroup | None = None
        self._on_failure = on_failure
        self.failure: SquiddError | None = None

    def busy(self, room_id: RoomId) -> bool:
        """Something of this room waits in its lane: later messages must queue behind it."""
        return room_id in self._lanes

    def push(self, room_id: RoomId, inbound: Inbound, content: Mapping[str, Any] | None) -> None:
        """Queue a message (a media one with its `content`) at the end of the room's lane."""
        if self._tg is None:
            raise RuntimeError("the download lanes run while the channel is connected")
        lane = self._lanes.get(room_id)
        if lane is None:
            lane = self._lanes[room_id] = deque()
            self._tg.start_soon(self._work, room_id, lane)
        lane.append(_Item(inbound, content))
        log.debug("matrix_message_queued", room=room_id, waiting=len(lane), media=bool(content))

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None
            self._drop_unhanded()

    async def _work(self, room_id: RoomId, lane: deque[_Item]) -> None:
        while lane:
            item = lane[0]
            inbound = item.inbound
            with structlog.contextvars.bound_contextvars(room=room_id, event_id=inbound.source_id):
                if item.content is not None:
                    try:
                        async with self._limiter:
                            inbound = await self._fetch(inbound, item.content)
                    except SquiddError as exc:
                        self._fail(exc)
                        return
                    except Exception:  # the per-event boundary, as in the sync loop
                        log.exception("matrix_event_failed")
                item.handing = True
                try:
                    await self._hand_on(room_id, inbound)
                except SquiddError as exc:
                    self._fail(exc)
                    return
            lane.popleft()
        del self._lanes[room_id]

    def _fail(self, exc: SquiddError) -> None:
        if self.failure is None:
            self.failure = exc
        self._on_failure()

    def _drop_unhanded(self) -> None:
        dropped = 0
        for lane in self._lanes.values():
            for item in lane:
                if not item.handing:
                    self._forget(EventId(item.inbound.source_id))
                    dropped += 1
        self._lanes.clear()
        if dropped:
            log.info("matrix_downloads_dropped", messages=dropped, reason="connection ended")
