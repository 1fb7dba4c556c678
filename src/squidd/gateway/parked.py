"""Parked messages sent again on the operator's request (`squidd parked retry ID`).

The request is a state in the parked item's own file (`retry`), set by the command whether
the daemon runs or not; the daemon takes requests at start and every `gateway.parked_poll_s`
seconds. A file rather than a request over the status socket, because: the request is durable
the moment the command returns (a daemon that stops or is killed before acting finds it at its
next start), one path serves a daemon running or not, and only the daemon ever sends, so a
retry can never race the daemon's own send of the same reply.

Exactly once: taking a request marks the item `retrying` with its retry number n, and the
message goes to the router under the record id `parked:<id>:<n>`, its stored reply put in the
outbox under that record first, so the router sends it without a new turn (with no reply kept,
the turn runs again). From there the router's outbox and handled record make it exactly once,
across a crash too: an item still `retrying` at start is taken again under the same record
id. Delivered, the item is removed; refused or parked again, it is back to `parked` with the
new reason.
"""

from __future__ import annotations

import dataclasses

import anyio
import structlog
from anyio.abc import TaskStatus

from squidd.core.models import ChannelName, SourceId
from squidd.core.poison import Parked, ParkState
from squidd.core.ports import Outbox
from squidd.core.router import Router
from squidd.errors import StorageError
from squidd.store.parked import ParkedDir, UnknownParkedError

__all__ = ["ParkedRetries", "record_id"]

log = structlog.get_logger()


def record_id(item: Parked) -> str:
    """The router's record id of the item's current retry."""
    return f"parked:{item.id}:{item.retries}"


def _taken(item: Parked) -> Parked:
    if item.state is ParkState.RETRY:
        return item.with_state(ParkState.RETRYING, retries=item.retries + 1)
    return item


class ParkedRetries:
    """Takes retry requests from the dead-letter folder and hands them to the router."""

    def __init__(self, parked: ParkedDir, outbox: Outbox, router: Router, *, poll_s: float) -> None:
        self._parked = parked
        self._outbox = outbox
        self._router = router
        self._poll_s = poll_s
        self._in_router: set[str] = set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                await self.take()
            except StorageError as exc:  # the folder unreadable now: try again next time
                log.warning("parked_retries_unreadable", reason=str(exc))
            await anyio.sleep(self._poll_s)

    async def take(self) -> int:
        """Hand every requested (or interrupted) retry to the router; how many were."""
        taken = 0
        for item in await self._parked.list():
            wanted = item.state is ParkState.RETRY or (
                item.state is ParkState.RETRYING and item.id not in self._in_router
            )
            if not wanted:
                continue
            if not item.retryable:
                await self._parked.change(item.id, lambda p: p.with_state(ParkState.PARKED))
                log.warning("parked_retry_impossible", parked_id=item.id, loop=item.loop)
                continue
            try:
                await self._parked.change(item.id, _taken)
            except UnknownParkedError:
                continue  # dropped meanwhile
            await self._submit(_taken(item))
            taken += 1
        return taken

    async def _submit(self, item: Parked) -> None:
        if item.inbound is None:  # not retryable: `take` did not hand it here
            return
        record = record_id(item)
        self._in_router.add(item.id)
        if item.reply is not None:
            await self._outbox.put(ChannelName(item.channel), SourceId(record), item.reply)

        async def delivered() -> None:
            self._in_router.discard(item.id)
            try:
                await self._parked.change(item.id, lambda p: None)
            except UnknownParkedError:
                return
            log.info("parked_retry_delivered", parked_id=item.id, retry=item.retries)

        async def failed(reason: str) -> None:
            self._in_router.discard(item.id)
            try:
                await self._parked.change(
                    item.id, lambda p: p.with_state(ParkState.PARKED, reason=reason)
                )
            except UnknownParkedError:
                return
            log.warning("parked_retry_failed", parked_id=item.id, retry=item.retries)

        inbound = dataclasses.replace(
            item.inbound, record_id=record, ack=delivered, on_undeliverable=failed
        )
        log.info("parked_retry_started", parked_id=item.id, retry=item.retries)
        await self._router.submit(inbound)
