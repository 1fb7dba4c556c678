"""Finished replies waiting for delivery, one small JSON file each.

`<data dir>/gateway/outbox/<safe name of channel + source id>.json`, written atomically
before the reply is sent and removed once it was delivered. After a crash between the
model's turn and the delivery, the redelivered message finds its reply here and the same
text is sent without running the model again.
"""

from __future__ import annotations

from pathlib import Path

from squidd.core.models import PendingReply
from squidd.store.json_dir import JsonDir


class OutboxDir:
    """Implements the router's `Outbox` on a directory of atomically written files."""

    def __init__(self, data_dir: Path) -> None:
        self._records = JsonDir(
            data_dir / "gateway" / "outbox", kind="pending_reply", decode=PendingReply.from_dict
        )

    async def get(self, channel: str, source_id: str) -> PendingReply | None:
        return await self._records.get(channel, source_id)

    async def put(self, channel: str, source_id: str, reply: PendingReply) -> None:
        data = {**reply.to_dict(), "source_channel": channel, "source_id": source_id}
        await self._records.put(channel, source_id, data)

    async def remove(self, channel: str, source_id: str) -> None:
        await self._records.remove(channel, source_id)

    async def count(self) -> int:
        """Replies waiting for delivery (shown by `squidd status`)."""
        return await self._records.count()
