"""The daemon as the dashboard sees it: the adapter implementing `web.host.DashboardHost`
(structurally; the gateway does not import the web layer), and `dashboard_host`, which the
composition root calls to build it from the services it made: each page's question goes to
the one service that owns the answer, never to the daemon's object itself.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import anyio

from squidd.config import Settings
from squidd.core.approvals import Approvals, Choice, Question
from squidd.core.cron_service import CronJobs
from squidd.core.models import HistoryHit
from squidd.core.poison import Parked
from squidd.core.ports import ControlOp, HasControlOps, MemoryStore
from squidd.core.usage import Price, UsageRecord
from squidd.gateway.backups import backup_now, default_name
from squidd.gateway.costs import prices_of
from squidd.gateway.daemon import Daemon
from squidd.store.parked import ParkedDir, ask_retry, refuse_retrying
from squidd.store.timings import TimingsLedger, TurnTiming
from squidd.store.usage import UsageLedger

BACKUP_SUFFIX = ".tar.gz"
DASHBOARD = "dashboard"
"""Who answered, in the audit log, for an approval given on the dashboard."""


@dataclass(frozen=True, slots=True)
class DaemonDashboardHost:
    """What the dashboard's pages read and change, each from the one service that owns it."""

    data_dir: Path
    cron: CronJobs
    status: Callable[[], Awaitable[Mapping[str, Any]]]
    approvals: Approvals | None
    store: MemoryStore
    usage: UsageLedger
    price_list: Callable[[Iterable[str]], dict[str, Price]]
    """The configured prices, else the price table's (gateway/costs.py `prices_of`)."""
    search: Callable[[str, int], Awaitable[list[HistoryHit]]]
    """Search across every conversation's history (the store's history index)."""
    parked_dir: ParkedDir
    control_ops: Callable[[], Mapping[str, ControlOp]]
    """The channels' operator requests (`matrix.verify`), as the status socket answers them."""
    backup_dir: Path
    backup: Callable[[], Path]
    """Write a backup now (blocking; run in a worker thread), its path."""
    timings: TimingsLedger

    async def snapshot(self) -> Mapping[str, Any]:
        return await self.status()

    async def approvals_waiting(self) -> list[Question]:
        return await self.approvals.waiting() if self.approvals is not None else []

    async def answer_approval(self, question_id: str, choice: Choice) -> str | None:
        if self.approvals is None:
            return None
        return await self.approvals.answer(question_id, DASHBOARD, choice, check_sender=False)

    async def memory(self) -> str:
        return await self.store.load_global_memory()

    async def save_memory(self, text: str) -> None:
        await self.store.save_global_memory(text)

    async def usage_today(self) -> list[UsageRecord]:
        return await self.usage.today_records()

    async def usage_since(self, since: date) -> list[UsageRecord]:
        return await self.usage.read(since)

    def local_today(self) -> date:
        return date.fromisoformat(self.usage.today())

    def prices(self, models: Iterable[str]) -> Mapping[str, Price]:
        return self.price_list(models)

    async def search_history(self, query: str, limit: int) -> list[HistoryHit]:
        return await self.search(query, limit)

    async def parked(self) -> list[Parked]:
        return await self.parked_dir.list()

    async def retry_parked(self, item_id: str) -> Parked:
        return await self.parked_dir.change(item_id, ask_retry)

    async def drop_parked(self, item_id: str) -> None:
        await self.parked_dir.change(item_id, refuse_retrying)

    async def verifications(self) -> list[Mapping[str, Any]] | None:
        listing = self.control_ops().get("matrix.verifications")
        if listing is None:
            return None
        return list((await listing({})).get("verifications") or [])

    async def confirm_verification(self, flow_id: str, *, match: bool) -> Mapping[str, Any]:
        verify = self.control_ops().get("matrix.verify")
        if verify is None:
            return {"error": "Matrix is not on"}
        return await verify({"id": flow_id, "match": match})

    async def backups(self) -> list[Path]:
        def listing() -> list[Path]:
            try:
                found = [p for p in self.backup_dir.iterdir() if p.name.endswith(BACKUP_SUFFIX)]
            except FileNotFoundError:
                return []
            return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)

        return await anyio.to_thread.run_sync(listing)

    async def timings_since(self, since: date) -> list[TurnTiming]:
        return await self.timings.read(since)

    async def create_backup(self) -> Path:
        return await anyio.to_thread.run_sync(self.backup)


def dashboard_host(daemon: Daemon, cron: CronJobs) -> DaemonDashboardHost:
    """What the dashboard sees of the daemon, from the services built above."""
    runtime, settings = daemon.runtime, daemon.settings
    return DaemonDashboardHost(
        data_dir=daemon.settings.storage.data_dir,
        cron=cron,
        status=daemon.snapshot,
        approvals=runtime.approvals,
        store=runtime.store,
        usage=runtime.usage,
        price_list=functools.partial(prices_of, daemon.settings),
        search=lambda query, limit: runtime.store.search_all_sessions(query, limit=limit),
        parked_dir=daemon.parked,
        control_ops=lambda: {
            name: op
            for channel in daemon.channels.values()
            if isinstance(channel, HasControlOps)
            for name, op in channel.control_ops().items()
        },
        backup_dir=settings.backup_dir,
        backup=lambda: _backup_now(settings),
        timings=TimingsLedger(settings.storage.data_dir, timezone=settings.limits.timezone),
    )


def _backup_now(settings: Settings) -> Path:
    """A backup as `squidd backup create` writes one into the backup folder (the dashboard's
    "Back up now"), with secrets as `[backup] include_secrets` says."""
    target = settings.backup_dir / default_name()
    backup_now(settings, target, secrets=settings.backup.include_secrets)
    return target
