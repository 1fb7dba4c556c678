"""The daemon: serves what the composition root built, under one root task group.

`squidd.gateway.build.build_daemon` builds every store and service once and hands them
here; the daemon only serves. One root task group holds the status socket, the router, each
channel's pipeline (gateway/pipeline.py: what happens to a message before its session's
queue) and, each under the supervisor, every channel's receive loop, the cron scheduler,
the heartbeat, the scheduled backups and each MCP server's connection (`mcp:<name>`; its
tools join a turn only while it is up).
SIGTERM/SIGINT stop intake and give in-flight turns a grace period; SIGHUP re-reads the
workspace prompt files.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
import structlog
from anyio import CancelScope
from anyio.abc import TaskGroup, TaskStatus

from squidd import __version__
from squidd.config import Settings
from squidd.core.heartbeat import Heartbeat
from squidd.core.models import utcnow
from squidd.core.ports import Channel, ControlOp, HasControlOps
from squidd.core.prompts import drop_decided
from squidd.core.router import Router
from squidd.core.scheduler import CronScheduler
from squidd.core.supervisor import ChildFn, ChildHealth, Supervisor
from squidd.errors import EXIT_OK
from squidd.gateway.audit_anchor import AuditAnchor
from squidd.gateway.backups import ScheduledBackups
from squidd.gateway.caps import DailyCaps, agent_figures
from squidd.gateway.parked import ParkedRetries
from squidd.gateway.pipeline import Pipeline
from squidd.gateway.runtime import Runtime
from squidd.gateway.scheduled import ScheduledRuns, heartbeat_child
from squidd.gateway.status import StatusServer, socket_path
from squidd.gateway.subagents import SubAgents
from squidd.gateway.systemd import Notifier, watchdog, watchdog_interval_s
from squidd.gateway.turn_runner import TurnRunner
from squidd.store.cron_deliveries import CronDeliveries
from squidd.store.cron_jobs import JobsFile
from squidd.store.handled import HandledFile
from squidd.store.outbox import OutboxDir
from squidd.store.parked import ParkedDir
from squidd.tools.mcp import McpHub

log = structlog.get_logger()

MCP_CHILD_PREFIX = "mcp:"


@dataclass(eq=False)
class Daemon:
    """Everything `squidd run` runs, built by `build_daemon`; `serve()` returns the exit code."""

    settings: Settings
    runtime: Runtime
    channels: dict[str, Channel]
    supervisor: Supervisor
    handled: HandledFile
    outbox: OutboxDir
    parked: ParkedDir
    parked_retries: ParkedRetries
    jobs: JobsFile
    router: Router
    pipelines: dict[str, Pipeline]
    turns: TurnRunner
    caps: DailyCaps
    agent_caps: Mapping[str, DailyCaps]
    """Each agent's caps: the daemon's, and its own when it has a `limits` table."""
    scheduled: ScheduledRuns
    subagents: SubAgents
    mcp: McpHub
    scheduler: CronScheduler | None
    heartbeats: dict[str, Heartbeat]
    """Each agent's heartbeat that is on, by its child's name (`heartbeat`: the default
    agent's, `heartbeat:<agent>`: another's)."""
    notifier: Notifier
    handle_signals: bool = True
    backups: ScheduledBackups | None = None
    anchor: AuditAnchor | None = None
    ops: Mapping[str, ControlOp] = field(default_factory=dict)
    """The daemon's own requests on the status socket (`cron.changed`, `cron.run`)."""
    ready: anyio.Event = field(default_factory=anyio.Event, init=False)
    started_at: datetime = field(default_factory=utcnow, init=False)
    started_monotonic: float = field(default_factory=time.monotonic, init=False)
    _stopping: bool = field(default=False, init=False)
    _tg: TaskGroup | None = field(default=None, init=False)

    # --- status ----------------------------------------------------------------------------

    async def snapshot(self) -> dict[str, Any]:
        children = [
            {**health.to_dict(), "kind": self._kind(name), **self._details(name)}
            for name, health in self.supervisor.children.items()
        ]
        # An agent with its own `unattended` allowances has its own asker (runtime.py).
        askers = {id(a.unattended): a.unattended for a in self.runtime.agents.values()}
        return {
            "version": __version__,
            "pid": os.getpid(),
            "started_at": self.started_at.isoformat(),
            "uptime_s": round(time.monotonic() - self.started_monotonic, 1),
            "ready": self.ready.is_set(),
            "stopping": self._stopping,
            "children": children,
            "turns": self.router.stats(),
            "outbox": await self.outbox.count(),
            "parked": (await self.parked.summary()).to_dict(),
            "journal": await self.runtime.journal.in_flight() if self.runtime.journal else [],
            "mcp": self.mcp.snapshot(),
            "usage_today": await self.turns.usage_today(),
            "model": await self._model(),
            "agents": await self._agents(),
            "speech": self._speech(),
            "limits": [state.to_dict() for state in await self.caps.states()],
            "subagents": self.subagents.snapshot(),
            "cron": self.scheduler.next_runs() if self.scheduler else None,
            "cron_deliveries": await anyio.to_thread.run_sync(
                CronDeliveries(self.settings.storage.data_dir).read_sync
            ),
            "unattended_denied": [
                denied for asker in askers.values() if asker for denied in asker.snapshot()
            ],
            "heartbeat": self._next_beats().get("heartbeat"),
            "heartbeats": self._next_beats(),
        }

    @property
    def heartbeat(self) -> Heartbeat | None:
        """The default agent's heartbeat, when it is on."""
        return self.heartbeats.get("heartbeat")

    def _next_beats(self) -> dict[str, str | None]:
        return {
            name: beat.next_beat.isoformat() if beat.next_beat else None
            for name, beat in self.heartbeats.items()
        }

    async def _model(self) -> dict[str, Any]:
        """The model's health and providers, with today's fall-overs from the ledger (they
        outlive a restart)."""
        today = await self.runtime.usage.failovers()
        return {
            **self.runtime.llm.snapshot(),
            "failovers": [dataclasses.asdict(f) for f in today[-20:]],
            "failovers_today": len(today),
        }

    def _speech(self) -> dict[str, Any]:
        """Voice replies: on or off, answers spoken, failures and the last one's reason."""
        shared = self.runtime.shared
        if shared is None or shared.speech is None:
            return {"enabled": False}
        return shared.speech.health.snapshot()

    async def _agents(self) -> list[dict[str, Any]]:
        """Each agent (none listed with one agent): its workspace, routes and model, its
        usage today, its own caps and its heartbeat's next beat."""
        if not self.settings.agents.list:
            return []
        entries = {entry.name: entry for entry in self.settings.agents.list}
        children = self.supervisor.children
        accounts: dict[str, list[str]] = {}
        for account in (*self.settings.matrix_accounts(), *self.settings.mail_accounts()):
            state = children[account.channel].state if account.channel in children else "off"
            line = f"{account.channel} {account.who} ({state})"
            accounts.setdefault(account.agent, []).append(line)
        beats = self._next_beats()
        return [
            {
                "name": name,
                "default": name == self.settings.default_agent,
                "workspace": str(agent.settings.workspace_dir),
                "rooms": list(entries[name].rooms),
                "addresses": list(entries[name].addresses),
                "accounts": accounts.get(name, []),
                "model": agent.llm.snapshot(),
                **await agent_figures(agent, self.agent_caps.get(name)),
                "heartbeat": beats.get(heartbeat_child(name, default=name == self.runtime.name)),
            }
            for name, agent in self.runtime.agents.items()
        ]

    def _control_ops(self) -> dict[str, ControlOp]:
        """The requests the status socket answers: the daemon's own (`cron.run`) and the
        channels' operator requests (`matrix.verify`)."""
        return {
            **self.ops,
            **{
                name: op
                for channel in self.channels.values()
                if isinstance(channel, HasControlOps)
                for name, op in channel.control_ops().items()
            },
        }

    def _details(self, child: str) -> dict[str, Any]:
        """What a channel adds about itself (`status_details()`, optional), e.g. Matrix's
        cross-signing identity."""
        details = getattr(self.channels.get(child), "status_details", None)
        if not callable(details):
            return {}
        found = details()
        return {"details": found} if isinstance(found, dict) and found else {}

    def _kind(self, child: str) -> str:
        if child in self.channels:
            return "channel"
        return "mcp" if child.startswith(MCP_CHILD_PREFIX) else "loop"

    def _summary(self) -> str:
        states = ", ".join(
            f"{name} {health.state}" for name, health in self.supervisor.children.items()
        )
        stats = self.router.stats()
        return f"{states or 'no channels'}; {stats['in_flight']} turn(s) in flight"

    async def _sweep_tool_results(self, every_s: float = 3600.0) -> None:
        results = self.runtime.results
        keep_s = self.settings.tools.result_retention_days * 86400.0
        while True:
            await results.sweep(time.time(), keep_s)
            await anyio.sleep(every_s)

    async def _status_lines(self, every_s: float = 30.0) -> None:
        while True:
            await anyio.sleep(every_s)
            self.notifier.status(self._summary())

    async def _sweep_media(self) -> None:
        """Media older than `media.lifetime_hours` is removed, checked every sweep interval."""
        while True:
            await anyio.sleep(self.settings.media.sweep_interval_s)
            try:
                await self.runtime.media.sweep()
            except OSError as exc:
                log.warning("media_sweep_failed", reason=str(exc))

    # --- life cycle ------------------------------------------------------------------------

    def _child(self, channel: Channel) -> ChildFn:
        # The channel's messages go through its pipeline (gateway/pipeline.py), which
        # outlives this child: what a stage holds survives the channel's restart.
        pipeline = self.pipelines[channel.name]

        async def run(health: ChildHealth, *, task_status: TaskStatus[None]) -> None:
            await channel.run(pipeline, task_status=task_status)

        return run

    async def _start_child(self, tg: TaskGroup, name: str, child: ChildFn) -> None:
        await tg.start(self.supervisor.supervise, name, child)

    async def serve(self) -> int:
        self.notifier.status("starting")
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self.handle_signals:
                tg.start_soon(self._signals, tg)
            # The socket first: a second daemon on this data dir stops before touching state.
            status = StatusServer(socket_path(self.settings), self.snapshot, self._control_ops())
            await tg.start(status.serve)
            await self.handled.load()
            # Before any turn: a local server's real window sets the prompt budget.
            await self.runtime.learn_windows()
            if self.runtime.journal is not None:  # journals of messages done before a crash
                await self.runtime.journal.sweep(self.handled.contains)
            if self.runtime.approvals is not None:  # prompts of questions decided meanwhile
                waiting = {q.id for q in await self.runtime.approvals.waiting()}
                await drop_decided(await self.outbox.sources(), waiting, self.outbox)
            await tg.start(self.router.run)
            for pipeline in self.pipelines.values():
                await tg.start(pipeline.run)
            await self.runtime.usage.compact_past_days()
            await self.scheduled.resume()
            await tg.start(self.parked_retries.run)
            await self.runtime.media.sweep(leftovers=True)  # no download runs yet
            # Side by side: one channel's connection (a Matrix login and first sync) does
            # not wait for another's (an IMAP login); READY still waits for all of them.
            async with anyio.create_task_group() as starting:
                for name, channel in self.channels.items():
                    starting.start_soon(self._start_child, tg, name, self._child(channel))
            if self.scheduler is not None:
                await tg.start(self.supervisor.supervise, "cron", self.scheduler.run)
            for child, beat in self.heartbeats.items():
                await tg.start(self.supervisor.supervise, child, beat.run)
            if self.backups is not None:
                await tg.start(self.supervisor.supervise, "backup", self.backups.run)
            if self.anchor is not None:
                await tg.start(self.supervisor.supervise, "audit_anchor", self.anchor.run)
            for agent, runtime in self.runtime.agents.items():  # embeds in the background
                if runtime.recall is not None and runtime.recall.index is not None:
                    child = f"recall:{agent}" if self.settings.agents.list else "recall"
                    await tg.start(self.supervisor.supervise, child, runtime.recall.run)
            # Not awaited: a server that is slow to start (or never does) must not hold up
            # readiness; its tools join turns once it is connected.
            for name, server in self.mcp.servers.items():
                tg.start_soon(self.supervisor.supervise, f"{MCP_CHILD_PREFIX}{name}", server.run)
            self.ready.set()
            summary = self._summary()
            self.notifier.ready(summary)
            log.info(
                "daemon_ready",
                channels=sorted(self.channels),
                cron=self.scheduler is not None,
                mcp_servers=sorted(self.mcp.servers),
                heartbeats=sorted(self.heartbeats),
            )
            interval = watchdog_interval_s()
            if interval is not None:
                tg.start_soon(watchdog, self.notifier, interval)
            tg.start_soon(self._status_lines)
            tg.start_soon(self._sweep_media)
            tg.start_soon(self._sweep_tool_results)
        log.info("daemon_stopped")
        self.notifier.close()
        return EXIT_OK

    def request_stop(self) -> None:
        """What SIGTERM does: a graceful stop (for embedding and tests)."""
        if self._tg is not None and not self._stopping:
            self._stopping = True
            self._tg.start_soon(self.shutdown, self._tg.cancel_scope)

    async def _signals(self, tg: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    self.runtime.prompt.invalidate()
                    log.info("prompt_reload_requested", signal="SIGHUP")
                    continue
                if self._stopping:
                    log.warning("shutdown_forced", signal=signal.Signals(signum).name)
                    tg.cancel_scope.cancel()
                    return
                log.info("shutdown_requested", signal=signal.Signals(signum).name)
                self.request_stop()

    async def shutdown(self, scope: CancelScope) -> None:
        """Stop intake, let in-flight turns finish within the grace period, then cancel."""
        self._stopping = True
        self.notifier.stopping("stopping: finishing turns in flight")
        self.router.stop_intake()
        grace = self.settings.gateway.shutdown_grace_s
        with anyio.move_on_after(grace) as waited:
            await self.router.wait_idle()
        if waited.cancelled_caught:
            log.warning(
                "shutdown_grace_expired",
                grace_s=grace,
                in_flight=self.router.stats()["in_flight"],
                note="unanswered messages stay unacknowledged and come back after a restart",
            )
        scope.cancel()
