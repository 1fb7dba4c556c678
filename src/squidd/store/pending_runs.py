"""Scheduled runs (cron jobs, heartbeats) fired but not yet answered, one JSON file each.

`<data dir>/gateway/runs/<safe name of channel + source id>.json` is written atomically
before a run is handed to the router and removed when the router acknowledges it (its reply
was delivered, or it needed none). After a crash in between, the daemon hands the run to the
router again at start; the router's handled-id record keeps it from being answered twice.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import anyio
import structlog

from squidd.core.models import PendingRun
from squidd.errors import StorageError
from squidd.fs import atomic_write_text, safe_name

log = structlog.get_logger()


class PendingRunsDir:
    def __init__(self, data_dir: Path) -> None:
        self._dir = data_dir / "gateway" / "runs"

    def _path(self, channel: str, source_id: str) -> Path:
        return self._dir / f"{safe_name(f'{channel}:{source_id}')}.json"

    async def put(self, run: PendingRun) -> None:
        text = json.dumps(run.to_dict(), ensure_ascii=False, indent=1)
        path = self._path(run.channel, run.source_id)
        await anyio.to_thread.run_sync(atomic_write_text, path, text)

    def _remove_sync(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    async def remove(self, channel: str, source_id: str) -> None:
        try:
            await anyio.to_thread.run_sync(self._remove_sync, self._path(channel, source_id))
        except OSError as exc:
            raise StorageError(f"cannot remove a pending run: {exc.strerror or exc}") from exc

    def _load_sync(self) -> list[PendingRun]:
        try:
            paths = sorted(p for p in self._dir.iterdir() if p.suffix == ".json")
        except FileNotFoundError:
            return []
        runs: list[PendingRun] = []
        for path in paths:
            try:
                runs.append(PendingRun.from_dict(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, KeyError, TypeError):
                # Left in place for a human to look at; never overwritten.
                log.warning("pending_run_unreadable", path=str(path))
        return runs

    async def load(self) -> list[PendingRun]:
        """Runs fired before the last stop and not acknowledged, oldest name first."""
        return await anyio.to_thread.run_sync(self._load_sync)
