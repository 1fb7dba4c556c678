"""`squidd doctor`'s lines for the agents of `[[agents.list]]` (none with one agent): each
agent's workspace (there, or made on first start; its SOUL.md or the built-in prompt), its
chain, and its routes — a room routed while Matrix is off, an address while email is off,
or an address that is none of the bot's (its +tags) cannot reach it; nor can the person a
heartbeat is for when its target names a channel that does not run (a typo of
`matrix-<agent>`, or `matrix:` with only the agents' own accounts on)."""

from __future__ import annotations

import os
from pathlib import Path

from squidd.config import Settings
from squidd.config.agents import AgentEntry
from squidd.ops.doctor import Check

__all__ = ["agent_checks"]


def agent_checks(settings: Settings) -> list[Check]:
    return [_check(settings, entry) for entry in settings.agents.list]


def _check(settings: Settings, entry: AgentEntry) -> Check:
    name = f"agent {entry.name}" + (" (default)" if entry.name == settings.default_agent else "")
    mine = settings.for_agent(entry.name)
    workspace = mine.workspace_dir
    problem = _workspace_problem(workspace)
    if problem is not None:
        return Check.fail(name, problem, f"create {workspace} for squidd's user, or fix its path")
    routes = _route_problems(settings, entry)
    if routes:
        return Check.fail(name, "; ".join(routes), "fix agents.list's rooms or addresses")
    beat = mine.heartbeat
    channel = beat.target.partition(":")[0]
    if beat.enabled and beat.target and channel not in settings.channel_names():
        running = ", ".join(settings.channel_names()) or "none"
        return Check.fail(
            name,
            f"its heartbeat goes to {beat.target!r}, but no channel {channel!r} runs "
            f"(running: {running}): its replies could not be delivered",
            "fix the heartbeat's target (e.g. matrix-<agent>:!room:server for an agent's own "
            "account)",
        )
    soul = "its SOUL.md" if (workspace / "SOUL.md").is_file() else "the built-in prompt"
    chain = " -> ".join(entry.chain) if entry.chain else "the daemon's chain"
    where = [*entry.rooms, *entry.addresses]
    routed = f"; routes {', '.join(where)}" if where else ""
    return Check.ok(name, f"workspace {workspace} ({soul}); {chain}{routed}")


def _workspace_problem(workspace: Path) -> str | None:
    if workspace.is_dir():
        return None if os.access(workspace, os.W_OK | os.X_OK) else f"{workspace} is not writable"
    if workspace.exists():
        return f"{workspace} is not a directory"
    parent = next((p for p in workspace.parents if p.exists()), None)
    if parent is None or not os.access(parent, os.W_OK | os.X_OK):
        return f"{workspace} does not exist and cannot be made"
    return None  # made at the first start


def _route_problems(settings: Settings, entry: AgentEntry) -> list[str]:
    problems = []
    if entry.rooms and not settings.matrix.enabled:
        problems.append("rooms are routed to it but Matrix is off")
    if entry.addresses and not settings.email.enabled:
        problems.append("addresses are routed to it but email is off")
    own = settings.email.address.lower()
    local, _, domain = own.partition("@")
    for address in entry.addresses:
        base = address.partition("@")[0].partition("+")[0]
        if settings.email.enabled and (address.partition("@")[2] != domain or base != local):
            problems.append(f"{address} is not {own} or one of its +tags: no mail reaches it")
    return problems
