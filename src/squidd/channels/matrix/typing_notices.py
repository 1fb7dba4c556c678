"""Typing notices: one lease per message being answered, kept alive while its turn runs.

A room shows "typing" while any of its messages holds a lease: `start` takes one when a
message goes to the inbox, `stop` gives it back when the reply was sent or the message was
acked, and the last lease out sends the "stopped" notice. `run` refreshes the notice of
every room with leases before the homeserver's timeout lapses, and drops leases older than
`TYPING_MAX_S` (a turn that never ends must not type forever). Failures are logged at
debug level only: a typing notice is a courtesy, never worth failing a turn over.
A message's typing lease is one of its marks: `message_marks.MessageMarks` takes and gives
it back, beside the status reactions.

(Not named `typing.py`: that would shadow the standard library's module of that name.)
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import structlog
from nio import AsyncClient, ErrorResponse

from squidd.channels.matrix.client import call
from squidd.channels.matrix.ids import EventId, RoomId
from squidd.errors import TransientError

log = structlog.get_logger()

TYPING_TIMEOUT_MS = 30_000
TYPING_REFRESH_S = 20.0
TYPING_MAX_S = 15 * 60  # a turn that never ends must not type forever


class TypingNotices:
    """The typing leases of every room; `client` gives the logged-in client, None offline."""

    def __init__(
        self,
        *,
        enabled: bool,
        monotonic: Callable[[], float],
        client: Callable[[], AsyncClient | None],
    ) -> None:
        self._enabled = enabled
        self._monotonic = monotonic
        self._client = client
        # room id -> {event id being answered -> when the typing lease began}
        self._leases: dict[RoomId, dict[EventId, float]] = {}
        self._wakeup = anyio.Event()

    def start(self, room_id: RoomId, event_id: EventId) -> None:
        if not self._enabled:
            return
        self._leases.setdefault(room_id, {})[event_id] = self._monotonic()
        self._wakeup.set()

    def wake(self) -> None:
        """Refresh now rather than at the next interval."""
        self._wakeup.set()

    async def stop(self, room_id: RoomId, event_id: EventId) -> None:
        """Give the lease back: its reply was sent, or it was acknowledged."""
        leases = self._leases.get(room_id)
        if leases is None or leases.pop(event_id, None) is None:
            return
        if leases:
            return
        del self._leases[room_id]
        client = self._client()
        if client is not None:
            await self._send(client, room_id, typing=False)

    async def run(self, client: AsyncClient) -> None:
        """Keep the typing notice of every room with a turn in progress alive."""
        while True:
            self._wakeup = anyio.Event()
            now = self._monotonic()
            for room_id, leases in list(self._leases.items()):
                # Each send awaits: an ack may have ended this room's turns meanwhile (and
                # `stop` sent the "stopped" notice). The snapshot is stale then.
                if self._leases.get(room_id) is not leases:
                    continue
                for event_id, began in list(leases.items()):
                    if now - began > TYPING_MAX_S:
                        del leases[event_id]
                if not leases:
                    self._leases.pop(room_id, None)
                    await self._send(client, room_id, typing=False)
                else:
                    await self._send(client, room_id, typing=True)
            with anyio.move_on_after(TYPING_REFRESH_S):
                await self._wakeup.wait()

    async def _send(self, client: AsyncClient, room_id: RoomId, *, typing: bool) -> None:
        try:
            response = await call(
                "typing notice", client.room_typing(room_id, typing, timeout=TYPING_TIMEOUT_MS)
            )
        except TransientError as exc:
            log.debug("matrix_typing_failed", room=room_id, reason=str(exc))
            return
        if isinstance(response, ErrorResponse):
            log.debug("matrix_typing_failed", room=room_id, reason=response.message)
