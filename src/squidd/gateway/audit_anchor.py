"""The audit log's head sent out once a day (`[tools.audit] anchor_to`).

The hash chain (core/audit.py) shows an edited, removed or reordered line, but not a log
rewritten whole with a new head. A copy of the head kept somewhere else catches that too:
once a UTC day, when the log has lines, the head (line count and last hash) is sent to
`anchor_to` (e.g. `matrix:!ownerdm:example.org` or `email:owner@example.org`) through that
channel, and the day is written to `<data dir>/audit/anchored.json` only after the send
succeeded, so a failed send is tried again within the hour and a restart does not send twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime

import anyio
import structlog
from anyio.abc import TaskStatus

from squidd.core.models import Destination, Outbound, SessionId, utcnow
from squidd.core.ports import Channel
from squidd.core.supervisor import ChildHealth
from squidd.errors import SquiddError
from squidd.fs import atomic_write_text, read_text_or_empty
from squidd.store.audit import AuditFile

log = structlog.get_logger()

__all__ = ["AuditAnchor"]

SESSION = SessionId("audit-anchor")


class AuditAnchor:
    def __init__(
        self,
        audit: AuditFile,
        channels: Mapping[str, Channel],
        destination: Destination,
        *,
        now: Callable[[], datetime] = utcnow,
        check_s: float = 3600.0,
    ) -> None:
        self._audit = audit
        self._channels = channels
        self._destination = destination
        self._now = now
        self._check_s = check_s
        self.state_path = audit.dir / "anchored.json"

    def _last_day(self) -> str:
        try:
            return str(json.loads(read_text_or_empty(self.state_path) or "{}").get("day", ""))
        except (json.JSONDecodeError, AttributeError):
            return ""

    async def once(self) -> bool:
        """Send today's head if it is due; True when it was sent now."""
        day = self._now().date().isoformat()
        if await anyio.to_thread.run_sync(self._last_day) == day:
            return False
        head = await anyio.to_thread.run_sync(self._audit.read_head)
        if head is None:
            return False
        channel = self._channels.get(self._destination.channel)
        if channel is None:
            log.warning("audit_anchor_no_channel", channel=self._destination.channel)
            return False
        text = f"squidd audit head, {day}: {head.lines} lines, last hash {head.hash}"
        await channel.send(
            Outbound(
                channel=self._destination.channel,
                target=self._destination.target,
                text=text,
                session_id=SESSION,
                subject="squidd audit head",
            )
        )
        state = json.dumps({"day": day, "lines": head.lines, "hash": head.hash})
        await anyio.to_thread.run_sync(atomic_write_text, self.state_path, state + "\n")
        log.info("audit_anchor_sent", lines=head.lines)
        return True

    async def run(self, health: ChildHealth, *, task_status: TaskStatus[None]) -> None:
        task_status.started()
        while True:
            try:
                await self.once()
            except SquiddError as exc:
                log.warning("audit_anchor_failed", reason=str(exc))
            await anyio.sleep(self._check_s)
