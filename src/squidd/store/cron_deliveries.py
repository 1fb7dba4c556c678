"""Each cron job's last delivery, so a job whose reply could not be delivered shows it where
people look: `squidd cron list`, `squidd status` and the dashboard, not only in the log.

The daemon records one outcome per job when its run is done: delivered (or no reply was
due), or refused for good with the channel's reason (an unknown recipient, a room the bot
was removed from). One JSON object in `<data dir>/gateway/cron_deliveries.json`, replaced
atomically; the daemon is its one writer, the command line reads it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from squidd.errors import StorageError
from squidd.fs import make_private_dir, read_json_object, write_json_object

__all__ = ["CronDeliveries", "delivery_note"]


class CronDeliveries:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / "gateway" / "cron_deliveries.json"
        self._lock = anyio.Lock()

    def read_sync(self) -> dict[str, dict[str, Any]]:
        """Job name -> {"at", "ok", "reason"}; empty when nothing was recorded (or the file
        cannot be read: this is a report, never a reason to fail a listing)."""
        try:
            found = read_json_object(self._path) or {}
        except StorageError:
            return {}
        return {str(k): v for k, v in found.items() if isinstance(v, dict)}

    async def record(self, job: str, *, reason: str | None) -> None:
        """The outcome of `job`'s latest run: None for delivered, else why not."""
        entry = {
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "ok": reason is None,
            "reason": reason,
        }
        async with self._lock:
            await anyio.to_thread.run_sync(self._write, job, entry)

    def _write(self, job: str, entry: dict[str, Any]) -> None:
        make_private_dir(self._path.parent)
        found = self.read_sync()
        found[job] = entry
        write_json_object(self._path, found)


def delivery_note(entry: dict[str, Any] | None) -> str:
    """`last delivery failed at ...: reason`, `last delivered at ...`, or "" (none yet)."""
    if not entry:
        return ""
    if entry.get("ok"):
        return f"last delivered {entry.get('at')}"
    return f"LAST DELIVERY FAILED {entry.get('at')}: {entry.get('reason')}"
