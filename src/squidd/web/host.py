"""What the dashboard asks of the daemon: `DashboardHost`, a narrow protocol defined here,
on the web side, and implemented by a small adapter in the gateway
(gateway/dashboard_host.py), built and attached by the composition root.

The pages use nothing else of the daemon: a new page adds a method here (and its
implementation in the adapter), never a reach into the daemon's objects.
`tests/test_architecture.py` holds that web/ never imports the daemon's module nor names
its class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path
from typing import Any, Protocol

from squidd.core.approvals import Choice, Question
from squidd.core.cron_service import CronJobs
from squidd.core.models import HistoryHit
from squidd.core.poison import Parked
from squidd.core.usage import Price, UsageRecord
from squidd.store.timings import TurnTiming


class DashboardHost(Protocol):
    """The running daemon, as far as the dashboard sees it."""

    @property
    def data_dir(self) -> Path:
        """The data dir, read off the event loop by the audit and sessions pages."""
        ...

    @property
    def cron(self) -> CronJobs:
        """The cron service (list, pause, resume, remove, run now), the daemon's own."""
        ...

    async def snapshot(self) -> Mapping[str, Any]:
        """What `squidd status` prints: channels, turns, usage, caps, heartbeat, parked."""
        ...

    async def approvals_waiting(self) -> list[Question]:
        """The approval questions waiting for an answer (none when approvals are off)."""
        ...

    async def answer_approval(self, question_id: str, choice: Choice) -> str | None:
        """Answer a question from the dashboard; what to tell, None when approvals are off."""
        ...

    async def memory(self) -> str:
        """MEMORY.md as it is."""
        ...

    async def save_memory(self, text: str) -> None: ...

    async def usage_today(self) -> list[UsageRecord]:
        """Today's usage records, one per model call."""
        ...

    async def usage_since(self, since: date) -> list[UsageRecord]:
        """The ledger's records from the local day `since` on (read off the event loop)."""
        ...

    def local_today(self) -> date:
        """Today in the ledger's timezone (the day the caps and `status` count)."""
        ...

    def prices(self, models: Iterable[str]) -> Mapping[str, Price]:
        """The price per million tokens of each of `models` that has a known one."""
        ...

    async def search_history(self, query: str, limit: int) -> list[HistoryHit]:
        """The newest matches of `query` across every conversation (the history index);
        raises `StorageError` when the index cannot be read."""
        ...

    async def parked(self) -> list[Parked]:
        """The messages parked after repeated failures, oldest first."""
        ...

    async def retry_parked(self, item_id: str) -> Parked:
        """Ask for one to be sent again (the daemon takes it within `parked_poll_s`); the
        item as it was. Raises `UnknownParkedError`, or ValueError saying why not."""
        ...

    async def drop_parked(self, item_id: str) -> None:
        """Remove one for good. Raises `UnknownParkedError`, or ValueError saying why not."""
        ...

    async def verifications(self) -> list[Mapping[str, Any]] | None:
        """The Matrix verifications the bot is in, as `squidd matrix verify` lists them (id,
        user_id, device_id, state, emoji, decimals, cancel_code); None without Matrix."""
        ...

    async def confirm_verification(self, flow_id: str, *, match: bool) -> Mapping[str, Any]:
        """The emoji match (`match`: the bot's MAC is sent) or differ (cancelled): what
        `squidd matrix verify --yes/--no` does; `{"error": ...}` when it cannot."""
        ...

    async def backups(self) -> list[Path]:
        """The backups in the backup folder (`squidd backup create`'s and the scheduled
        ones), newest first."""
        ...

    async def create_backup(self) -> Path:
        """Write a backup now, as `squidd backup create` does; raises `BackupError`."""
        ...

    async def timings_since(self, since: date) -> list[TurnTiming]:
        """How long each turn took (and its first token, where it streamed) from the local
        day `since` on."""
        ...
