"""The daemon as the dashboard sees it: the adapter implementing `web.host.DashboardHost`
(structurally; the gateway does not import the web layer), built by the composition root
from the services it made, never from the daemon's object.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from squidd.core.approvals import Approvals, Choice, Question
from squidd.core.cron_service import CronJobs
from squidd.core.models import HistoryHit
from squidd.core.ports import MemoryStore
from squidd.core.usage import Price, UsageRecord
from squidd.store.usage import UsageLedger

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
