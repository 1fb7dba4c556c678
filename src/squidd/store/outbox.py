"""Finished replies waiting for delivery, one small JSON file each.

`<data dir>/gateway/outbox/<safe name of channel + source id>.json`, written atomically
before the reply is sent and removed once it was delivered. After a crash between the
model's turn and the delivery, the redelivered message finds its reply here and the same
text is sent without running the model again.

The daemon is the outbox's only writer (one daemon per data dir), so after one listing it
knows which entries exist: the lookup every new message makes, which finds none, costs no
file operation, and neither does removing an entry that was never written.

"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import structlog

from squidd.core.models import PendingReply
from squidd.store.json_dir import JsonDir
from squidd.store.records import PENDING_REPLY

log = structlog.get_logger(__name__)


class OutboxDir:
    """Implements the router's `Outbox` on a directory of atomically written files."""

    def __init__(self, data_dir: Path) -> None:
        self._records = JsonDir(
            data_dir / "gateway" / "outbox", kind="pending_reply", decode=PENDING_REPLY.load
        )
        self._sources = JsonDir(
            data_dir / "gateway" / "outbox", kind="pending_reply", decode=_source
        )
        self._present: set[str] | None = None  # file names of the entries, once listed
        self._listing = anyio.Lock()

    async def _names(self) -> set[str]:
        if self._present is None:
            async with self._listing:
                if self._present is None:
                    self._present = await self._records.names()
        return self._present

    def _name(self, channel: str, source_id: str) -> str:
        return self._records.path(channel, source_id).name

    async def get(self, channel: str, source_id: str) -> PendingReply | None:
        if self._name(channel, source_id) not in await self._names():
            return None
        return await self._records.get(channel, source_id)

    async def put(self, channel: str, source_id: str, reply: PendingReply) -> None:
        data = {**PENDING_REPLY.dump(reply), "source_channel": channel, "source_id": source_id}
        present = await self._names()
        await self._records.put(channel, source_id, data)
        present.add(self._name(channel, source_id))

    async def remove(self, channel: str, source_id: str) -> None:
        name, present = self._name(channel, source_id), await self._names()
        if name not in present:
            return
        await self._records.remove(channel, source_id)
        present.discard(name)

    def leftover(self, channel: str, source_id: str) -> Callable[[], None] | None:
        """store/handled.py's `Leftover`: the entry's removal, when there is one."""
        present = self._present
        if present is None or self._name(channel, source_id) not in present:
            return None
        return partial(self._records.remove_sync, channel, source_id)

    def dropped(self, channel: str, source_id: str) -> None:
        if self._present is not None:
            self._present.discard(self._name(channel, source_id))

    async def count(self) -> int:
        """Replies waiting for delivery (shown by `squidd status`)."""
        return await self._records.count()

    async def sources(self) -> list[tuple[str, str]]:
        """The (channel, source id) of every readable entry."""
        return await self._sources.load()


def _source(data: Any) -> tuple[str, str]:
    return str(data["source_channel"]), str(data["source_id"])
