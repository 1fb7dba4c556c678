"""Scheduled runs: a cron job's firing or a heartbeat (each agent's, `AgentBeat`) becomes a
message for the router.

Each run is written to disk (store/pending_runs.py) before it is handed to the router and
removed when the router acknowledges it (its reply was delivered, or it needed none). After
a crash in between, `resume` hands the run on again at start; the router's handled-id record
keeps it from being answered twice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import anyio
import structlog

from squidd.core.cron import CronJob
from squidd.core.heartbeat import HEARTBEAT_OK, HEARTBEAT_SESSION
from squidd.core.models import InboundKind
from squidd.core.router import Router
from squidd.core.runs import PendingRun
from squidd.store.cron_deliveries import CronDeliveries
from squidd.store.pending_runs import PendingRunsDir

log = structlog.get_logger()


class ScheduledRuns:
    """Fires cron jobs and heartbeats into the router, durably."""

    def __init__(
        self,
        router: Router,
        runs: PendingRunsDir,
        *,
        workspace_dir: Path,
        heartbeat_target: str,
        deliveries: CronDeliveries | None = None,
    ) -> None:
        self._router = router
        self._deliveries = deliveries
        self._runs = runs
        self._beat = self.beat_of("", workspace_dir, heartbeat_target)

    def beat_of(self, agent: str, workspace_dir: Path, target: str) -> AgentBeat:
        """The heartbeat runs of agent `agent` ("": the default agent): its workspace's
        HEARTBEAT.md, its target."""
        return AgentBeat(self, agent, anyio.Path(workspace_dir / "HEARTBEAT.md"), target)

    async def fire_cron(self, job: CronJob, when: datetime) -> None:
        await self.fire(
            PendingRun(
                kind=InboundKind.CRON,
                source_id=f"{job.name}@{when.isoformat()}",
                session_id=job.session_id,
                text=job.prompt,
                target=job.target,
                subject=job.name,
                agent=job.agent,
            )
        )

    async def fire_heartbeat(self, prompt: str, when: datetime) -> None:
        await self._beat.fire(prompt, when)

    async def resume(self) -> None:
        """Hand on again every run fired before the last stop and not acknowledged."""
        for run in await self._runs.load():
            log.info("scheduled_run_resumed", channel=run.channel, run=run.source_id)
            await self.fire(run, recorded=True)

    async def read_checklist(self) -> str:
        return await self._beat.read_checklist()

    async def fire(self, run: PendingRun, *, recorded: bool = False) -> None:
        """Hand a run to the router, durably: it is on disk until the router acknowledges
        it, so a crash in between does not lose it. Background sub-agents come here too."""
        if not recorded:
            await self._runs.put(run)

        deliveries = self._deliveries if run.kind is InboundKind.CRON else None

        async def ack() -> None:
            await self._runs.remove(run.channel, run.source_id)
            if deliveries is not None:
                await deliveries.record(run.subject, reason=None)

        async def undeliverable(reason: str) -> None:
            # A cron reply refused for good: done like an ack, and the job shows why.
            await self._runs.remove(run.channel, run.source_id)
            if deliveries is not None:
                await deliveries.record(run.subject, reason=reason)

        inbound = run.inbound(ack)
        if deliveries is not None:
            inbound = replace(inbound, on_undeliverable=undeliverable)
        await self._router.submit(inbound)


def heartbeat_child(agent: str, *, default: bool) -> str:
    """The supervised child running agent `agent`'s heartbeat: `heartbeat` for the default
    agent (as before agents), `heartbeat:<agent>` for another."""
    return "heartbeat" if default else f"heartbeat:{agent}"


@dataclass(frozen=True, slots=True)
class AgentBeat:
    """One agent's heartbeat: its checklist read, its runs fired into its own session (the
    agent's `heartbeat`) and delivered to its target. The default agent's runs keep the
    source id they had before agents (`heartbeat@<time>`); another agent's are
    `heartbeat:<agent>@<time>`, so two agents' beats at one time are two runs."""

    runs: ScheduledRuns
    agent: str
    checklist: anyio.Path
    target: str

    async def read_checklist(self) -> str:
        """HEARTBEAT.md, or "" when it is missing or unreadable (the heartbeat then rests)."""
        try:
            return await self.checklist.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""
        except (OSError, UnicodeDecodeError) as exc:
            log.warning(
                "heartbeat_checklist_unreadable",
                path=str(self.checklist),
                agent=self.agent,
                reason=str(exc),
            )
            return ""

    async def fire(self, prompt: str, when: datetime) -> None:
        source = "heartbeat" if not self.agent else f"heartbeat:{self.agent}"
        await self.runs.fire(
            PendingRun(
                kind=InboundKind.HEARTBEAT,
                source_id=f"{source}@{when.isoformat()}",
                session_id=HEARTBEAT_SESSION,
                text=prompt,
                target=self.target,
                quiet_reply=HEARTBEAT_OK,
                agent=self.agent,
            )
        )
