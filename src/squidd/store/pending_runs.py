"""Scheduled runs (cron jobs, heartbeats) fired but not yet answered, one JSON file each.

`<data dir>/gateway/runs/<safe name of channel + source id>.json` is written atomically
before a run is handed to the router and removed when the router acknowledges it (its reply
was delivered, or it needed none). After a crash in between, the daemon hands the run to the
router again at start; the router's handled-id record keeps it from being answered twice.
"""

from __future__ import annotations

from pathlib import Path

from squidd.core.runs import PendingRun
from squidd.store.json_dir import JsonDir


class PendingRunsDir:
    def __init__(self, data_dir: Path) -> None:
        self._records = JsonDir(
            data_dir / "gateway" / "runs", kind="pending_run", decode=PendingRun.from_dict
        )

    async def put(self, run: PendingRun) -> None:
        await self._records.put(run.channel, run.source_id, run.to_dict())

    async def remove(self, channel: str, source_id: str) -> None:
        await self._records.remove(channel, source_id)

    async def load(self) -> list[PendingRun]:
        """Runs fired before the last stop and not acknowledged, oldest name first."""
        return await self._records.load()
