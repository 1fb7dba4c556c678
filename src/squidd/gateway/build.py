"""The composition root: every store and service of the daemon, built once, in one place.

`build_daemon` builds the runtime (`gateway.runtime.build_runtime`: store, LLM, memory,
tools, media store, saved tool results, agent), the daemon's own stores (handled ids,
outbox, dead letters and attempt counts, cron jobs, pending runs), the router, the per-turn
tools (`gateway.turn_tools`), the caps, scheduled runs, cron scheduler, heartbeat, MCP hub
and the enabled channels (from a `gateway.channels.ChannelRegistry`), and hands them to
`Daemon`, which only serves; with `dashboard`, the dashboard's routes over the daemon's
`DaemonDashboardHost` are given to the API channel (through its factory, so its constructor).
The cron service is built once, for the cron tools, the dashboard and the status socket's
`cron.*` (and recall's `memory.*`) requests. `build_terminal` does the same for `squidd chat`
with no daemon. Construction does no I/O; the daemon loads and sweeps when it serves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

import httpx2

from squidd.config import Settings
from squidd.core.approvals import Asker
from squidd.core.backoff import Backoff
from squidd.core.clock import SystemClock
from squidd.core.cron_service import CronJobs
from squidd.core.heartbeat import Heartbeat, parse_active_hours
from squidd.core.models import Destination, Inbound
from squidd.core.poison import PoisonGuard
from squidd.core.ports import (
    Channel,
    Clock,
    ControlOp,
    HandledLog,
    HasControlOps,
    HasQuietWindow,
    HasStages,
    Stage,
    StreamsReplies,
)
from squidd.core.prompts import PromptDelivery
from squidd.core.reply_files import Reply
from squidd.core.router import Router
from squidd.core.scheduler import CronScheduler
from squidd.core.settlement import SettlementParts
from squidd.core.supervisor import Supervisor
from squidd.gateway.agents import AgentRoutes, agent_named
from squidd.gateway.approval_answers import ApprovalAnswers, ChannelAsker
from squidd.gateway.audit_anchor import AuditAnchor
from squidd.gateway.backups import ScheduledBackups
from squidd.gateway.bursts import Begun, Bursts, began_before, never_begun
from squidd.gateway.caps import DailyCaps, caps_of
from squidd.gateway.channels import ChannelRegistry, Pages, builtin_channels
from squidd.gateway.conversations import Conversations, StopEarly
from squidd.gateway.cron_ops import cron_ops
from squidd.gateway.cron_targets import daemon_check
from squidd.gateway.daemon import Daemon
from squidd.gateway.dashboard_host import DaemonDashboardHost, dashboard_host
from squidd.gateway.parked import ParkedRetries
from squidd.gateway.pipeline import Pipeline
from squidd.gateway.recall_ops import recall_ops
from squidd.gateway.runtime import Runtime, build_runtime
from squidd.gateway.scheduled import ScheduledRuns, heartbeat_child
from squidd.gateway.subagents import Fire
from squidd.gateway.systemd import Notifier
from squidd.gateway.terminal import Terminal
from squidd.gateway.turn_runner import TurnRunner
from squidd.gateway.turn_tools import TurnTools
from squidd.gateway.voice import voice_replies
from squidd.store.attempts import AttemptsDir
from squidd.store.audit import AuditFile
from squidd.store.cron_deliveries import CronDeliveries
from squidd.store.cron_jobs import JobsFile
from squidd.store.handled import HandledFile
from squidd.store.journal import JournalCleanup
from squidd.store.outbox import OutboxDir
from squidd.store.parked import ParkedDir
from squidd.store.pending_runs import PendingRunsDir
from squidd.store.timings import TimingsLedger
from squidd.tools.mcp import McpHub

__all__ = ["Dashboard", "Terminal", "build_daemon", "build_terminal", "stages_for"]

Dashboard = Callable[[DaemonDashboardHost], Pages]
"""The dashboard's routes over its host (`squidd.web.dashboard`, handed in by `squidd run`:
the gateway does not import the web layer)."""


def build_terminal(
    settings: Settings,
    mcp: McpHub | None = None,
    *,
    ignore_caps: bool = False,
    asker: Asker | None = None,
    agent: str | None = None,
) -> Terminal:
    """The runtime, the per-turn tools and the daily caps for turns in the terminal (no
    daemon: cron jobs made there have no scheduler to wake, sub-agents run only with
    wait=true, and the owner's cap notice is the daemon's to send); `agent` names the agent
    talked to (default: the default agent)."""
    runtime = build_runtime(settings, agent=agent or settings.default_agent)
    if asker is not None and runtime.approvals is not None:
        runtime.approvals.add_asker("terminal", asker)
    caps = None if ignore_caps else caps_of(settings, runtime.usage)
    if caps is not None:
        caps = caps.for_agent(runtime.name, settings.agent_caps(runtime.name))
    return Terminal(runtime, TurnTools(runtime, mcp=mcp), caps, Conversations(runtime))


def build_daemon(
    settings: Settings,
    *,
    channels: ChannelRegistry | None = None,
    clock: Clock | None = None,
    notifier: Notifier | None = None,
    handle_signals: bool = True,
    http_client: httpx2.AsyncClient | None = None,
    dashboard: Dashboard | None = None,
) -> Daemon:
    """The daemon for `settings`, with the enabled channels of `channels` (default: the
    built-in ones) and, when given, the `dashboard` on the API's listener. The caller
    closes `daemon.runtime` when the daemon is done.

    Raises `ConfigError` when a channel cannot be built from the settings.
    """
    gw = settings.gateway
    data_dir = settings.storage.data_dir
    clock = clock or SystemClock()
    runtime = build_runtime(settings, http_client=http_client)
    pages: list[Pages] = []  # the dashboard's routes, made below over the daemon's services
    built = (channels or builtin_channels()).build(settings, runtime.media, _all(pages))
    supervisor = _supervisor(settings)
    outbox, attempts = OutboxDir(data_dir), AttemptsDir(data_dir)
    retention = timedelta(days=gw.handled_retention_days)
    handled = HandledFile(data_dir, retention=retention, leftovers=(outbox, attempts))
    parked, jobs = ParkedDir(data_dir), JobsFile(data_dir)
    mcp = McpHub(settings.mcp)
    by_name = {channel.name: channel for channel in built}
    turns: dict[str, TurnRunner] = {}  # each agent's turn, made below: they need the caps
    routes = AgentRoutes(settings)

    async def run_turn(inbound: Inbound) -> str | Reply:
        return await agent_named(turns, routes.agent_of(inbound), routes.default)(inbound)

    done = handled if runtime.journal is None else JournalCleanup(handled, runtime.journal)
    poison = PoisonGuard(attempts, parked, max_attempts=gw.max_attempts)
    router = _router(settings, by_name, run_turn, supervisor, done, outbox, poison)
    conversations = Conversations(runtime)  # `/new`, `/model`, `/stop`: one for every part
    answers = _approvals_on_channels(
        runtime, by_name, router, outbox, handled, poison, conversations
    )
    scheduled = _scheduled(settings, router)
    scheduler, cron = _cron(settings, jobs, scheduled, clock, by_name)
    caps = caps_of(settings, runtime.usage, router.submit)
    agent_caps = {name: caps.for_agent(name, settings.agent_caps(name)) for name in runtime.agents}
    turns.update(_turn_runners(runtime, agent_caps, by_name, conversations, cron, mcp, scheduled))
    first = turns[runtime.name]
    begun = began_before(runtime.journal, outbox, handled, by_name)
    daemon = Daemon(
        settings=settings,
        runtime=runtime,
        channels=by_name,
        supervisor=supervisor,
        handled=handled,
        outbox=outbox,
        parked=parked,
        parked_retries=ParkedRetries(parked, outbox, router, poll_s=gw.parked_poll_s),
        jobs=jobs,
        router=router,
        pipelines=_pipelines(by_name, answers, first.conversations, router, begun),
        turns=first,
        caps=caps,
        agent_caps=agent_caps,
        scheduled=scheduled,
        subagents=first.subagents,
        mcp=mcp,
        scheduler=scheduler,
        heartbeats=_heartbeats(runtime, scheduled, turns, clock),
        notifier=notifier or Notifier(),
        handle_signals=handle_signals,
        backups=_backups(settings),
        anchor=_anchor(settings, by_name),
        ops=cron_ops(cron, scheduler) | recall_ops(runtime.recalls),
    )
    if dashboard is not None:
        pages.append(dashboard(dashboard_host(daemon, cron)))
    return daemon


def _turn_runners(
    runtime: Runtime,
    caps: Mapping[str, DailyCaps],
    channels: Mapping[str, Channel],
    conversations: Conversations,
    cron: CronJobs,
    mcp: McpHub,
    scheduled: ScheduledRuns,
) -> dict[str, TurnRunner]:
    """Each agent's turn: its runtime and per-call tools, its caps (the daemon's and its
    own), the channels' streams and the turn timings, the conversations as the agent sees
    them."""
    data_dir = runtime.settings.storage.data_dir
    timings = TimingsLedger(data_dir, timezone=runtime.settings.limits.timezone)
    streams = {name: c for name, c in channels.items() if isinstance(c, StreamsReplies)}
    fire: Fire = scheduled.fire
    return {
        name: TurnRunner(
            agent,
            caps[name],
            TurnTools(agent, cron=cron, mcp=mcp, fire=fire),
            streams,
            conversations.for_agent(agent),
            timings,
            voice_replies(agent.settings, name, agent.shared, agent.llm, caps[name]),
        )
        for name, agent in runtime.agents.items()
    }


def _supervisor(settings: Settings) -> Supervisor:
    gw = settings.gateway
    return Supervisor(
        Backoff(gw.restart_initial_delay_s, gw.restart_max_delay_s),
        healthy_after_s=gw.healthy_after_s,
    )


def _scheduled(settings: Settings, router: Router) -> ScheduledRuns:
    return ScheduledRuns(
        router,
        PendingRunsDir(settings.storage.data_dir),
        workspace_dir=settings.workspace_dir,
        heartbeat_target=settings.heartbeat.target,
        deliveries=CronDeliveries(settings.storage.data_dir),
    )


def _nothing() -> None:
    return None


def _all(pages: list[Pages]) -> Pages:
    """The routes of `pages`, as filled by the end of the build (the API's listener starts
    when the daemon serves, after it)."""

    def mount(app: Any) -> None:
        for add in pages:
            add(app)

    return mount


def _router(  # `handled` drops a turn's journal as it records it done (core/resume.py)
    settings: Settings,
    channels: dict[str, Channel],
    run_turn: Callable[[Inbound], Awaitable[str | Reply]],
    supervisor: Supervisor,
    handled: HandledLog,
    outbox: OutboxDir,
    poison: PoisonGuard,
) -> Router:
    gw = settings.gateway
    parts = SettlementParts(
        run_turn=run_turn,
        channels=channels,
        handled=handled,
        outbox=outbox,
        poison=poison,
        health_of=supervisor.health,
        delivery_backoff=Backoff(gw.delivery_retry_initial_s, gw.delivery_retry_max_s),
    )
    return Router(parts, max_concurrent_turns=gw.max_concurrent_turns)


def _pipelines(
    channels: dict[str, Channel],
    answers: ApprovalAnswers | None,
    conversations: Conversations,
    router: Router,
    begun: Begun,
) -> dict[str, Pipeline]:
    """Each channel's pipeline: its stages in order, then the router's inbox."""
    return {
        name: Pipeline(stages_for(channel, answers, conversations, begun=begun), router.inbox(name))
        for name, channel in channels.items()
    }


def stages_for(
    channel: Channel,
    answers: ApprovalAnswers | None,
    conversations: Conversations,
    *,
    begun: Begun = never_begun,
) -> list[Stage]:
    """The pipeline before the session queue of `channel`, in order (gateway/pipeline.py):
    the answers to an open question and `/stop` before anything that holds a message."""
    stages: list[Stage] = []
    if answers is not None:
        stages.append(answers)
    stages.append(StopEarly(conversations))
    if isinstance(channel, HasStages):
        stages.extend(channel.stages())
    quiet_s = channel.quiet_window_s() if isinstance(channel, HasQuietWindow) else None
    if quiet_s is not None:
        stages.append(Bursts(quiet_s=quiet_s, running=conversations, begun=begun))
    return stages


def _approvals_on_channels(
    runtime: Runtime,
    channels: dict[str, Channel],
    router: Router,
    outbox: OutboxDir,
    handled: HandledLog,
    poison: PoisonGuard,
    conversations: Conversations,
) -> ApprovalAnswers | None:
    """Each channel asks its questions in the conversation, the prompt delivered like a
    reply (core/prompts.py); answers are taken out of line."""
    approvals = runtime.approvals
    if approvals is None:
        return None
    prompts = PromptDelivery(deliver=router.deliver, outbox=outbox, handled=handled, poison=poison)
    timeout_s = runtime.settings.tools.approval.timeout_s
    for name in channels:
        approvals.add_asker(name, ChannelAsker(prompts, timeout_s))
    return ApprovalAnswers(approvals, channels, conversations.session)


def _channel_ops(channels: dict[str, Channel]) -> Callable[[], dict[str, ControlOp]]:
    """The channels' operator requests, read when asked (a job's target checked)."""

    def ops() -> dict[str, ControlOp]:
        return {
            name: op
            for channel in channels.values()
            if isinstance(channel, HasControlOps)
            for name, op in channel.control_ops().items()
        }

    return ops


def _cron(
    settings: Settings,
    jobs: JobsFile,
    scheduled: ScheduledRuns,
    clock: Clock,
    channels: dict[str, Channel],
) -> tuple[CronScheduler | None, CronJobs]:
    """The cron scheduler (when cron is on) and the one cron service over the jobs file:
    a change wakes the scheduler, a run now is a durable cron run, a new job's target is
    checked with its channel."""
    scheduler = _scheduler(settings, jobs, scheduled, clock)
    cron = CronJobs(
        jobs,
        default_timezone=settings.cron.default_timezone,
        run_now=scheduled.fire_cron,
        changed=scheduler.notify_changed if scheduler else _nothing,
        clock=clock.now,
        check_target=daemon_check(settings, channels, _channel_ops(channels)),
    )
    return scheduler, cron


def _scheduler(
    settings: Settings, jobs: JobsFile, scheduled: ScheduledRuns, clock: Clock
) -> CronScheduler | None:
    if not settings.cron.enabled:
        return None
    return CronScheduler(
        jobs,
        scheduled.fire_cron,
        clock=clock,
        misfire_grace=timedelta(seconds=settings.cron.misfire_grace_s),
        poll_s=settings.cron.poll_s,
    )


def _anchor(settings: Settings, channels: dict[str, Channel]) -> AuditAnchor | None:
    destination = Destination.parse(settings.tools.audit.anchor_to)
    if destination is None:
        return None
    return AuditAnchor(AuditFile(settings.storage.data_dir), channels, destination)


def _backups(settings: Settings) -> ScheduledBackups | None:
    every_s = settings.backup.every_s
    return ScheduledBackups(settings, every_s) if every_s is not None else None


def _heartbeats(
    runtime: Runtime, scheduled: ScheduledRuns, turns: Mapping[str, TurnRunner], clock: Clock
) -> dict[str, Heartbeat]:
    """Each agent's heartbeat whose `[heartbeat]` (its own table over the daemon's) is on,
    by its supervised child's name: `heartbeat` for the default agent, `heartbeat:<name>`
    for another; each reads its own workspace's HEARTBEAT.md and delivers to its target."""
    beats: dict[str, Heartbeat] = {}
    for name, agent in runtime.agents.items():
        hb = agent.settings.heartbeat
        if not hb.enabled:
            continue
        default = name == runtime.name
        beat = scheduled.beat_of("" if default else name, agent.settings.workspace_dir, hb.target)
        beats[heartbeat_child(name, default=default)] = Heartbeat(
            interval=timedelta(minutes=hb.interval_minutes),
            active_hours=parse_active_hours(hb.active_hours),
            timezone=hb.timezone,
            read_checklist=beat.read_checklist,
            fire=beat.fire,
            clock=clock,
            activity=_done_of(turns[name]),
        )
    return beats


def _done_of(turns: TurnRunner) -> Callable[[], int]:
    return lambda: turns.done
