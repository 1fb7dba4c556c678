"""`squidd status`: ask the running daemon how it is doing and print it for a person.

Reads the JSON document the daemon serves on its status socket (gateway/status.py) and
prints what a user asks when something seems wrong: uptime, each channel's state, last
traffic, each MCP server's state, tool count and last error, turns in flight and queued,
the turns with a journal (running tool calls, resumed after a crash, or cut short), the
messages parked after repeated failures (count, newest reason), the sub-agents running
(per parent session) and their caps, the next cron runs, and the approval questions
waiting for an answer (read from the data dir). When no daemon answers it says so,
shows the parked count read from the data dir, and exits 1.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from squidd.commands import Commands
from squidd.config import Settings
from squidd.errors import StorageError
from squidd.gateway.status import ask, socket_path
from squidd.llm.health import model_lines
from squidd.log import escape_unprintable
from squidd.store.approvals import QuestionFiles
from squidd.store.cron_deliveries import delivery_note
from squidd.store.parked import ParkedDir


def register(commands: Commands) -> None:
    status = commands.add(
        "status",
        help="ask the running daemon how it is doing (channels, model, cron)",
        run=_run,
        example="squidd status\nsquidd status --agent work",
    )
    status.add_argument(
        "--agent",
        default=None,
        help="the model, routes, usage, caps and heartbeat of this agent ([[agents.list]])",
    )


def _run(args: argparse.Namespace, settings: Settings) -> int:
    return status_command(settings, agent=getattr(args, "agent", None))


def agent_lines(agents: list[dict[str, Any]] | None, only: str | None = None) -> list[str]:
    """The daemon's agents, each with its routes; with `only`, that agent's model too."""
    if not agents:
        return []
    lines = ["agents:"]
    for agent in agents:
        if only is not None and agent.get("name") != only:
            continue
        routes = [*agent.get("rooms", []), *agent.get("addresses", [])]
        default = " (default)" if agent.get("default") else ""
        accounts = agent.get("accounts", [])
        lines.append(
            f"  {agent.get('name')}{default}: workspace {agent.get('workspace')}"
            + (f"; routes {', '.join(routes)}" if routes else "")
            + (f"; accounts {', '.join(accounts)}" if accounts else "")
        )
        if only is not None:
            lines.extend(f"  {line}" for line in model_lines(agent.get("model")))
            lines.extend(_agent_figures(agent))
    return lines


def _agent_figures(agent: dict[str, Any]) -> list[str]:
    """One agent's usage today, its own caps and its heartbeat (a daemon of this version)."""
    if "usage_today" not in agent:
        return []
    usage = agent.get("usage_today") or {}
    cost = f", cost {usage['cost']:.4f}" if usage.get("cost") else ""
    lines = [
        f"    usage today: {usage.get('total_tokens', 0)} tokens in "
        f"{usage.get('calls', 0)} calls{cost}"
    ]
    for cap in agent.get("limits") or ():
        mark = "REACHED, its turns refused until midnight" if cap.get("reached") else "ok"
        lines.append(f"    limit {cap['scope']}: {cap['used']:g} of {cap['cap']:g} - {mark}")
    beat = agent.get("heartbeat")
    lines.append(f"    heartbeat: next {beat}" if beat else "    heartbeat: off")
    return lines


def fetch_status(path: Path, timeout_s: float = 5.0) -> dict[str, Any]:
    """Read the daemon's status document; OSError when no daemon answers, ValueError or
    TypeError for an answer that is no JSON object."""
    return ask(path, {"op": "status"}, timeout_s)


def _ago(iso: str | None, now: datetime) -> str:
    if not iso:
        return "never"
    when = datetime.fromisoformat(iso)
    return f"{_duration((now - when).total_seconds())} ago"


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def _journal_lines(journals: list[dict[str, Any]] | None, now: datetime) -> list[str]:
    """The turns with a journal: running with tool calls, resumed after a crash, or cut
    short and waiting for their message to come back."""
    if not journals:
        return []
    lines = ["turns with tool calls not yet delivered (journal):"]
    for turn in journals:
        state = "resumed" if turn.get("resumed") else "in flight or cut short"
        lines.append(
            f"  {turn.get('session', '?'):<24} {state}, started "
            f"{_ago(turn.get('started_at'), now)}, {turn.get('tool_calls', 0)} tool call(s)"
        )
    return lines


def format_status(data: dict[str, Any], now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    lines = [
        f"squidd {data.get('version', '?')} running, pid {data.get('pid')}, "
        f"up {_duration(float(data.get('uptime_s', 0)))}"
    ]
    lines.append("channels and loops:")
    for child in data.get("children", []):
        state = child["state"]
        detail = f" - {child['detail']}" if child.get("detail") else ""
        lines.append(
            f"  {child['name']:<10} {state:<12} since {_ago(child.get('since'), now)}{detail}"
        )
        if child.get("kind") == "channel":
            lines.append(
                f"  {'':<10} last in {_ago(child.get('last_inbound'), now)}, "
                f"last out {_ago(child.get('last_outbound'), now)}, "
                f"restarts {child.get('restarts', 0)}"
            )
            lines.extend(_identity_lines((child.get("details") or {}).get("identity")))
    servers = data.get("mcp") or []
    if servers:
        lines.append("MCP servers:")
        for server in servers:
            error = f" - last error: {server['last_error']}" if server.get("last_error") else ""
            lines.append(
                f"  {server['name']:<10} {server['state']:<12} {server['tools']} tool(s){error}"
            )
    turns = data.get("turns", {})
    lines.append(
        f"turns: {turns.get('in_flight', 0)} in flight, {turns.get('queued', 0)} queued, "
        f"{turns.get('sessions', 0)} active sessions; "
        f"{data.get('outbox', 0)} replies waiting for delivery"
    )
    lines.extend(model_lines(data.get("model")))
    lines.extend(speech_lines(data.get("speech")))
    lines.extend(_journal_lines(data.get("journal"), now))
    lines.extend(parked_lines(data.get("parked")))
    lines.extend(_subagent_lines(data.get("subagents")))
    cron = data.get("cron")
    if cron is None:
        lines.append("cron: off")
    elif not cron:
        lines.append("cron: no jobs")
    else:
        lines.append("next cron runs:")
        deliveries = data.get("cron_deliveries") or {}
        for job in cron:
            target = job.get("target") or "(history only)"
            lines.append(
                f"  {job['name']:<16} {job.get('next_run') or '-'}  {job['schedule']}  -> {target}"
            )
            if note := delivery_note(deliveries.get(job["name"])):
                lines.append(f"  {'':<16} {note}")
    lines.extend(unattended_lines(data.get("unattended_denied"), now))
    usage = data.get("usage_today")
    if usage:
        cost = f", cost {usage['cost']:.4f}" if usage.get("cost") else ""
        lines.append(
            f"usage today ({usage.get('day')}): {usage.get('total_tokens', 0)} tokens "
            f"({usage.get('prompt_tokens', 0)} input, {usage.get('cached_tokens', 0)} cached, "
            f"{usage.get('completion_tokens', 0)} output) in {usage.get('calls', 0)} calls{cost}"
        )
    for cap in data.get("limits") or ():
        mark = "REACHED, turns refused until midnight" if cap.get("reached") else "ok"
        lines.append(f"limit {cap['scope']}: {cap['used']:g} of {cap['cap']:g} today - {mark}")
    lines.extend(heartbeat_lines(data))
    return "\n".join(lines)


def heartbeat_lines(data: dict[str, Any]) -> list[str]:
    """The default agent's heartbeat, then each other agent's that beats on its own (an
    agent's `[agents.list.heartbeat]` may be on while `[heartbeat]` is off)."""
    beats = data.get("heartbeats") or {}
    default = data.get("heartbeat")
    lines = [f"heartbeat: next {default}" if default else "heartbeat: off"]
    for child, beat in sorted(beats.items()):
        agent = child.partition(":")[2]
        if agent and beat:
            lines.append(f"heartbeat ({agent}): next {beat}")
    return lines


def speech_lines(speech: dict[str, Any] | None) -> list[str]:
    """Voice replies: answers spoken since start, failures and the last one's reason."""
    if not speech or not speech.get("enabled"):
        return []
    line = f"speech: {speech.get('spoken', 0)} spoken, {speech.get('failed', 0)} failed"
    last = speech.get("last_failure")
    if last:
        line += f"; last failure at {last.get('at')}: {last.get('reason')}"
    return [line]


def parked_lines(parked: dict[str, Any] | None) -> list[str]:
    """The parked count and the newest one's reason (see `squidd parked list`)."""
    if parked is None:  # a daemon from before parking
        return []
    count = int(parked.get("count", 0))
    if not count:
        return ["parked: 0"]
    reason = str(parked.get("newest_reason", ""))
    reason = reason if len(reason) <= 160 else reason[:159] + "…"
    return [
        f"parked: {count} (see `squidd parked list`); newest {parked.get('newest_id')} "
        f"at {parked.get('newest_at')}: {reason}"
    ]


def unattended_lines(denied: list[dict[str, Any]] | None, now: datetime) -> list[str]:
    """Cron and heartbeat runs whose tool calls were denied: no one was there to approve."""
    if not denied:
        return []
    lines = ["tool calls denied in cron and heartbeat runs (they need an approval, no one to ask):"]
    for job in denied:
        lines.append(
            f"  {job.get('session')}: {', '.join(job.get('tools') or [])} denied "
            f"{job.get('denied', 0)} time(s), last {_ago(job.get('last'), now)}"
        )
        lines.append(f"    fix: {job.get('fix', '')}")
    return lines


def _identity_lines(identity: dict[str, Any] | None) -> list[str]:
    """The Matrix account's cross-signing identity, as the channel last made sure of it."""
    if not identity:
        return []
    yes = {True: "yes", False: "NO"}
    lines = [
        f"  {'':<10} identity: master key {identity.get('master_key') or '(none)'}",
        f"  {'':<10} device cross-signed: {yes[bool(identity.get('device_cross_signed'))]}, "
        f"keys in secret storage: {yes[bool(identity.get('secret_storage'))]}",
    ]
    if identity.get("problem"):
        lines.append(f"  {'':<10} identity problem: {identity['problem']}")
    return lines


def _subagent_lines(subagents: dict[str, Any] | None) -> list[str]:
    if subagents is None:  # a daemon from before sub-agents
        return []
    if not subagents.get("enabled", True):
        return ["sub-agents: off"]
    caps = subagents.get("caps", {})
    lines = [
        f"sub-agents: {subagents.get('running', 0)} running "
        f"(caps: {caps.get('max_per_session')} per session, "
        f"{caps.get('max_running')} in the daemon, depth {caps.get('max_depth')}, "
        f"{float(caps.get('timeout_s', 0)):g} s, {caps.get('max_tool_rounds')} tool rounds each)"
    ]
    for session, count in (subagents.get("per_session") or {}).items():
        lines.append(f"  {session}: {count} running")
    return lines


def approval_lines(settings: Settings) -> list[str]:
    """The approval questions waiting for an answer, read from the data dir."""
    try:
        waiting = QuestionFiles(settings.storage.data_dir).waiting_sync()
    except StorageError:
        return ["approvals: unreadable"]
    lines = [f"approvals waiting: {len(waiting)}"]
    for question in waiting:
        prompt = escape_unprintable(question.prompt())
        lines.append(
            f"  {question.id}  {question.channel} {question.session}  {prompt}  "
            f"(until {question.deadline.isoformat(timespec='seconds')})"
        )
    return lines


def status_command(settings: Settings, *, agent: str | None = None) -> int:
    if agent is not None and agent not in settings.agent_names:
        print(f"no agent named {agent!r} (agents: {', '.join(settings.agent_names)})")
        return 2
    path = socket_path(settings)
    try:
        data = fetch_status(path)
    except (OSError, ValueError, TypeError):
        print(f"squidd is not running (no daemon answers on {path})", file=sys.stderr)
        try:
            summary = ParkedDir(settings.storage.data_dir).summary_sync()
        except StorageError:
            return 1
        for line in [*parked_lines(summary.to_dict()), *approval_lines(settings)]:
            print(line, file=sys.stderr)
        return 1
    if "error" in data:
        print(f"squidd is running but says: {data['error']}", file=sys.stderr)
        return 1
    print(format_status(data))
    lines = agent_lines(data.get("agents"), agent)
    if lines:
        print("\n".join(lines))
    print("\n".join(approval_lines(settings)))
    return 0
