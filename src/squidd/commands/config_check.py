"""`squidd config check`: validate the file and say what will run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from squidd.commands import Commands, Start
from squidd.config import Settings, find_config_file
from squidd.config.agents import CAP_KEYS
from squidd.gateway.people import memory_scope


def register(commands: Commands) -> None:
    config = commands.add("config", help="configuration helpers", example="squidd config check")
    actions = commands.actions(config, "config_command")
    # No logging set up: the check prints what it found, problems exit 2 before it runs.
    actions.add(
        "check",
        help="validate the config file; exit 2 on problems, 1 when there is no file",
        run=_run,
        start=Start.SETTINGS,
        example="squidd config check\nsquidd --config ./config.toml config check",
    )


def _run(args: argparse.Namespace, settings: Settings) -> int:
    return check_command(settings, args.config)


def check_command(settings: Settings, explicit: Path | None) -> int:
    """Settings were already validated by the loader (problems exit 2 before we get here)."""
    source = find_config_file(explicit)
    if source is None:
        # Not "ok": nothing was read, and `run` would refuse to start on it.
        print(
            "no config file found (~/.config/squidd/config.toml, /etc/squidd/config.toml, "
            "SQUIDD_CONFIG or --config): run `squidd init --interactive` to write one",
            file=sys.stderr,
        )
        return 1
    print(f"config ok: {source}")
    print(f"  data dir:  {settings.storage.data_dir}")
    print(f"  workspace: {settings.workspace_dir}")
    if settings.llm.providers:
        _print_providers(settings)
    else:
        print(f"  llm:       {settings.llm.model} at {settings.llm.base_url}")
        if settings.llm.api_key is None:
            print("  warning:   llm.api_key is not set (fine for endpoints that need none)")
    print(f"  channels:  {', '.join(settings.channel_names()) or 'none enabled'}")
    if settings.agents.list:
        named = [f"{n} (default)" if i == 0 else n for i, n in enumerate(settings.agent_names)]
        print(f"  agents:    {', '.join(named)}")
    people = ", ".join(p.name for p in settings.people) or "none listed"
    print(f"  memory:    {memory_scope(settings)} (people: {people})")
    print(f"  heartbeat: {heartbeat_line(settings)}")
    _print_tool_policy(settings)
    _print_agents_own(settings)
    _print_matrix_identity(settings)
    return 0


def _print_agents_own(settings: Settings) -> None:
    """What each agent sets over the daemon's tool policy, approvals, caps and heartbeat."""
    from squidd.config.tools import CHANNEL_NAMES
    from squidd.tools.policy import describe_policy

    for entry in settings.agents.list:
        mine = settings.for_agent(entry.name)
        head = f"  {'agent:':<10} {entry.name}:"
        if entry.tools is not None:
            for line in describe_policy(mine.tools, CHANNEL_NAMES)[: len(CHANNEL_NAMES)]:
                print(f"{head} tools {line}")
        if entry.approvals is not None:
            asks = ", ".join(mine.tools.approval.tools) or "nothing"
            print(f"{head} asks before: {asks}")
        caps = settings.agent_caps(entry.name)
        if caps is not None:
            own = [f"{key} {getattr(caps, key):g}" for key in CAP_KEYS if getattr(caps, key)]
            print(f"{head} own caps: {', '.join(own)} (and the daemon's)")
        if entry.heartbeat is not None:
            beat = mine.heartbeat
            where = f" -> {beat.target or '(history only)'}" if beat.enabled else ""
            print(f"{head} heartbeat {'on' if beat.enabled else 'off'}{where}")


def heartbeat_line(settings: Settings) -> str:
    """Which agents beat: an agent's own `[agents.list.heartbeat]` may turn it on alone."""
    if not settings.agents.list:
        return "on" if settings.heartbeat.enabled else "off"
    beating = [n for n in settings.agent_names if settings.for_agent(n).heartbeat.enabled]
    return f"on ({', '.join(beating)})" if beating else "off"


def _print_providers(settings: Settings) -> None:
    """The chain in the order a call tries it, then each provider (never a key)."""
    from squidd.config.providers import LOCAL_KINDS

    for number, entry in enumerate(settings.llm.resolved_chain(), start=1):
        head = "chain:" if number == 1 else ""
        print(f"  {head:<10} {number}. {entry.label} (window {entry.context_window})")
    for number, provider in enumerate(settings.llm.providers):
        count = len(provider.keys)
        if count:
            keys = f"{count} key(s)"
        else:
            keys = "no key" + (
                " (a local server needs none)" if provider.kind in LOCAL_KINDS else ""
            )
        head = "providers:" if number == 0 else ""
        print(f"  {head:<10} {provider.name} ({provider.kind}) {provider.base_url}, {keys}")


def _print_matrix_identity(settings: Settings) -> None:
    import anyio

    from squidd.ops.matrix_identity import identity_report

    if settings.matrix.enabled and settings.matrix.e2ee:
        print(f"  matrix:    device_trust {settings.matrix.device_trust}")
    for number, line in enumerate(anyio.run(identity_report, settings)):
        print(f"  {'identity:' if number == 0 else '':<10} {line}")


def _print_tool_policy(settings: Settings) -> None:
    from squidd.config.tools import CHANNEL_NAMES
    from squidd.tools.policy import describe_policy

    daemons = describe_policy(settings.tools, CHANNEL_NAMES)
    for number, line in enumerate(daemons):
        print(f"  {'tools:' if number == 0 else '':<10} {line}")
    for entry in settings.agents.list:
        # An agent's own tools table narrows its turns only: the lines that differ.
        own = describe_policy(settings.for_agent(entry.name).tools, CHANNEL_NAMES)
        for line in [line for line in own if line not in daemons]:
            print(f"  {'tools (' + entry.name + '):'} {line}")
        asks = settings.for_agent(entry.name).tools.approval.tools
        if entry.approvals is not None:
            print(f"  approvals ({entry.name}): {', '.join(asks) or 'none'} asked first")
    if settings.tools.web_fetch.allow_private_addresses_test_only:
        print(
            "  warning:   tools.web_fetch.allow_private_addresses_test_only is on: web_fetch "
            "can reach this machine and its network (for tests only)"
        )
