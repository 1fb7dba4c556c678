"""The composition root of `squidd run`: builds the adapters from the settings and runs them.

Start-up goes in phases: the settings were parsed and validated by the CLI; here the
daemon's own checks run (data dir, status socket path, channels that can be built) and
only then the event loop starts. One root task group holds the status socket, the router
and, each under the supervisor, every channel's receive loop, the cron scheduler and the
heartbeat. SIGTERM/SIGINT stop intake and give in-flight turns a grace period; SIGHUP
re-reads the workspace prompt files.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import anyio
import structlog
from anyio import CancelScope
from anyio.abc import TaskGroup, TaskStatus

from squidd import __version__
from squidd.config import Settings
from squidd.core.backoff import Backoff
from squidd.core.clock import SystemClock
from squidd.core.cron import CronJob
from squidd.core.heartbeat import HEARTBEAT_OK, Heartbeat, parse_active_hours
from squidd.core.models import Destination, Inbound, PendingRun, SessionId, utcnow
from squidd.core.ports import Channel, Clock, Tool
from squidd.core.router import Router
from squidd.core.scheduler import CronScheduler
from squidd.core.supervisor import ChildFn, ChildHealth, Supervisor
from squidd.errors import ConfigError
from squidd.runtime import Runtime, build_runtime
from squidd.status import (
    DaemonAlreadyRunningError,
    StatusServer,
    check_socket_path,
    socket_path,
)
from squidd.store.cron_jobs import JobsFile
from squidd.store.handled import HandledFile
from squidd.store.outbox import OutboxDir
from squidd.store.pending_runs import PendingRunsDir
from squidd.systemd import Notifier, watchdog, watchdog_interval_s
from squidd.tools.cron import CronToolContext, cron_tools

log = structlog.get_logger()

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2

ChannelFactory = Callable[[Settings], Channel]


def _factory(spec: str) -> ChannelFactory:
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    factory = getattr(module, attr or "create_channel")
    if not callable(factory):
        raise TypeError(f"{spec} is not callable")
    return factory  # type: ignore[no-any-return]


def build_channels(settings: Settings) -> list[Channel]:
    """The enabled channels; adapters are imported only when enabled."""
    factories: list[tuple[str, ChannelFactory]] = []
    specs = [
        *(["squidd.channels.matrix:create_channel"] if settings.matrix.enabled else []),
        *(["squidd.channels.email:create_channel"] if settings.email.enabled else []),
    ]
    problems: list[str] = []
    for spec in specs:
        factories.append((spec, _factory(spec)))
    for spec in settings.gateway.extra_channels:
        try:
            factories.append((spec, _factory(spec)))
        except (ImportError, AttributeError, TypeError) as exc:
            problems.append(f"gateway.extra_channels: cannot load {spec!r}: {exc}")
    if problems:
        raise ConfigError(problems)
    channels = [factory(settings) for _, factory in factories]
    names = [channel.name for channel in channels]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError([f"two channels are named {', '.join(duplicates)}"])
    return channels


def session_tools(
    runtime: Runtime,
    session: SessionId,
    *,
    default_target: str,
    jobs: JobsFile | None = None,
    on_cron_change: Callable[[], None] = lambda: None,
) -> list[Tool]:
    """Every per-call tool of a turn: memory tools plus the cron tools bound to `session`.

    Call sites (channels, cron, heartbeat, the terminal) pass the result as `extra_tools`.
    """
    settings = runtime.settings
    tools = list(runtime.memory_tools(session))
    if settings.cron.enabled:
        context = CronToolContext(
            store=jobs or JobsFile(settings.storage.data_dir),
            session_id=session,
            default_target=default_target,
            default_timezone=settings.cron.default_timezone,
            on_change=on_cron_change,
        )
        tools.extend(cron_tools(context))
    return tools


def reply_address(inbound: Inbound) -> str:
    """Where a conversation's scheduled replies go by default: where its answers go."""
    destination = inbound.destination
    return str(destination) if destination is not None else ""


class Daemon:
    """Everything `squidd run` runs, wired; `serve()` returns the exit code."""

    def __init__(
        self,
        settings: Settings,
        runtime: Runtime,
        channels: list[Channel],
        *,
        clock: Clock | None = None,
        notifier: Notifier | None = None,
        handle_signals: bool = True,
    ) -> None:
        gw = settings.gateway
        data_dir = settings.storage.data_dir
        self.settings = settings
        self.runtime = runtime
        self.clock = clock or SystemClock()
        self.notifier = notifier or Notifier()
        self.channels = {channel.name: channel for channel in channels}
        self.supervisor = Supervisor(
            Backoff(gw.restart_initial_delay_s, gw.restart_max_delay_s),
            healthy_after_s=gw.healthy_after_s,
        )
        self.handled = HandledFile(data_dir, retention=timedelta(days=gw.handled_retention_days))
        self.outbox = OutboxDir(data_dir)
        self.jobs = JobsFile(data_dir)
        self.pending_runs = PendingRunsDir(data_dir)
        self.router = Router(
            run_turn=self._run_turn,
            channels=self.channels,
            handled=self.handled,
            outbox=self.outbox,
            health_of=self.supervisor.health,
            max_concurrent_turns=gw.max_concurrent_turns,
            delivery_backoff=Backoff(gw.delivery_retry_initial_s, gw.delivery_retry_max_s),
        )
        self.scheduler: CronScheduler | None = None
        if settings.cron.enabled:
            self.scheduler = CronScheduler(
                self.jobs,
                self._fire_cron,
                clock=self.clock,
                misfire_grace=timedelta(seconds=settings.cron.misfire_grace_s),
                poll_s=settings.cron.poll_s,
            )
        self.heartbeat: Heartbeat | None = None
        if settings.heartbeat.enabled:
            hb = settings.heartbeat
            self.heartbeat = Heartbeat(
                interval=timedelta(minutes=hb.interval_minutes),
                active_hours=parse_active_hours(hb.active_hours),
                timezone=hb.timezone,
                read_checklist=self._read_checklist,
                fire=self._fire_heartbeat,
                clock=self.clock,
            )
        self.status_server = StatusServer(socket_path(settings), self.snapshot)
        self.started_monotonic = time.monotonic()
        self.started_at = utcnow()
        self._handle_signals = handle_signals
        self._stopping = False
        self._tg: TaskGroup | None = None
        self.ready = anyio.Event()

    # --- turns -----------------------------------------------------------------------------

    def tools_for(self, inbound: Inbound) -> list[Tool]:
        notify = self.scheduler.notify_changed if self.scheduler else (lambda: None)
        return session_tools(
            self.runtime,
            inbound.session_id,
            default_target=reply_address(inbound),
            jobs=self.jobs,
            on_cron_change=notify,
        )

    async def _run_turn(self, inbound: Inbound) -> str:
        return await self.runtime.agent.run(
            inbound.session_id,
            inbound.text,
            inbound.channel,
            extra_tools=self.tools_for(inbound),
            turn_id=f"{inbound.channel}:{inbound.source_id}",
        )

    async def _fire_cron(self, job: CronJob, when: datetime) -> None:
        await self._fire_run(
            PendingRun(
                channel="cron",
                source_id=f"{job.name}@{when.isoformat()}",
                session_id=job.session_id,
                text=job.prompt,
                target=job.target,
                subject=job.name,
            )
        )

    async def _fire_run(self, run: PendingRun, *, recorded: bool = False) -> None:
        """Hand a scheduled run to the router, durably: the run is on disk until the
        router acknowledges it, so a crash in between does not lose it."""
        if not recorded:
            await self.pending_runs.put(run)

        async def ack() -> None:
            await self.pending_runs.remove(run.channel, run.source_id)

        await self.router.submit(run.inbound(ack))

    async def _resume_runs(self) -> None:
        for run in await self.pending_runs.load():
            log.info("scheduled_run_resumed", channel=run.channel, run=run.source_id)
            await self._fire_run(run, recorded=True)

    async def _read_checklist(self) -> str:
        path = anyio.Path(self.settings.workspace_dir / "HEARTBEAT.md")
        try:
            return await path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("heartbeat_checklist_unreadable", path=str(path), reason=str(exc))
            return ""

    async def _fire_heartbeat(self, prompt: str, when: datetime) -> None:
        target = self.settings.heartbeat.target
        await self._fire_run(
            PendingRun(
                channel="heartbeat",
                source_id=f"heartbeat@{when.isoformat()}",
                session_id="heartbeat",
                text=prompt,
                target=target,
                quiet_reply=HEARTBEAT_OK,
            )
        )

    # --- status ----------------------------------------------------------------------------

    async def snapshot(self) -> dict[str, Any]:
        children = [
            {**health.to_dict(), "kind": "channel" if name in self.channels else "loop"}
            for name, health in self.supervisor.children.items()
        ]
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
            "cron": self.scheduler.next_runs() if self.scheduler else None,
            "heartbeat": (
                self.heartbeat.next_beat.isoformat()
                if self.heartbeat and self.heartbeat.next_beat
                else None
            ),
        }

    def _summary(self) -> str:
        states = ", ".join(
            f"{name} {health.state}" for name, health in self.supervisor.children.items()
        )
        stats = self.router.stats()
        return f"{states or 'no channels'}; {stats['in_flight']} turn(s) in flight"

    async def _status_lines(self, every_s: float = 30.0) -> None:
        while True:
            await anyio.sleep(every_s)
            self.notifier.status(self._summary())

    # --- life cycle ------------------------------------------------------------------------

    def _child(self, channel: Channel) -> ChildFn:
        async def run(health: ChildHealth, *, task_status: TaskStatus[None]) -> None:
            await channel.run(self.router.inbox(channel.name), task_status=task_status)

        return run

    async def serve(self) -> int:
        self.notifier.status("starting")
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self._handle_signals:
                tg.start_soon(self._signals, tg)
            # The socket first: a second daemon on this data dir stops before touching state.
            await tg.start(self.status_server.serve)
            await self.handled.load()
            await tg.start(self.router.run)
            await self._resume_runs()
            for name, channel in self.channels.items():
                await tg.start(self.supervisor.supervise, name, self._child(channel))
            if self.scheduler is not None:
                await tg.start(self.supervisor.supervise, "cron", self.scheduler.run)
            if self.heartbeat is not None:
                await tg.start(self.supervisor.supervise, "heartbeat", self.heartbeat.run)
            self.ready.set()
            summary = self._summary()
            self.notifier.ready(summary)
            log.info(
                "daemon_ready",
                channels=sorted(self.channels),
                cron=self.scheduler is not None,
                heartbeat=self.heartbeat is not None,
            )
            interval = watchdog_interval_s()
            if interval is not None:
                tg.start_soon(watchdog, self.notifier, interval)
            tg.start_soon(self._status_lines)
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


def _prepare(settings: Settings) -> list[str]:
    """Checks that need the file system, before anything starts."""
    problems: list[str] = []
    data_dir = settings.storage.data_dir
    try:
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        problems.append(f"storage.data_dir: cannot create {data_dir}: {exc.strerror or exc}")
    problem = check_socket_path(socket_path(settings))
    if problem:
        problems.append(f"storage.data_dir: {problem}")
    if settings.heartbeat.enabled and not Destination.parse(settings.heartbeat.target):
        log.warning(
            "heartbeat_without_target",
            note="heartbeat replies are kept in the heartbeat session only",
        )
    return problems


def run_command(settings: Settings) -> int:
    problems = _prepare(settings)
    try:
        channels = build_channels(settings)
        runtime = build_runtime(settings)
    except ConfigError as exc:
        problems.extend(exc.problems)
        channels, runtime = [], None
    if problems or runtime is None:
        for problem in problems:
            print(f"config: {problem}", flush=True, file=sys.stderr)
        return EXIT_CONFIG
    if not channels:
        log.warning("no_channel_enabled", note="only cron and heartbeat will run")

    async def main() -> int:
        try:
            return await Daemon(settings, runtime, channels).serve()
        finally:
            with anyio.CancelScope(shield=True):
                await runtime.aclose()

    try:
        return anyio.run(main)
    except Exception as exc:
        inner = _unwrap(exc)
        if isinstance(inner, DaemonAlreadyRunningError):
            log.error("daemon_not_started", reason=str(inner))  # noqa: TRY400 - expected
        else:
            log.exception("daemon_failed", reason=f"{type(inner).__name__}: {inner}")
        return EXIT_FAILURE


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
