"""Command-line parsing only. Each command loads settings, sets up logging, then calls into
the module that does the work. Start-up happens in phases (args, settings, logging,
validation, event loop) so a bad config fails fast with its own exit code.

Exit codes: 0 ok, 1 runtime failure, 2 configuration error (systemd does not restart on it).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from squidd import __version__
from squidd.config import Settings, load_settings
from squidd.errors import EXIT_CONFIG, EXIT_OK, ConfigError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="squidd", description="A personal AI assistant daemon.")
    parser.add_argument("--version", action="version", version=f"squidd {__version__}")
    parser.add_argument(
        "--config", type=Path, default=None, help="config file (default: see README)"
    )
    # --config is accepted before or after the command (`squidd config check --config X`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", type=Path, default=argparse.SUPPRESS, help="config file")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(group: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        parsed: argparse.ArgumentParser = group.add_parser(name, parents=[common], **kwargs)
        return parsed

    add(sub, "run", help="run the daemon (channels, cron, heartbeat)")

    chat = add(sub, "chat", help="talk to the assistant in the terminal")
    chat.add_argument("-m", "--message", help="send one message, print the reply, exit")
    chat.add_argument("--session", default="terminal", help="session name (default: terminal)")

    add(sub, "status", help="ask the running daemon how it is doing")

    usage = add(sub, "usage", help="tokens and money spent, from the usage ledger")
    usage.add_argument(
        "--by",
        choices=("session", "model", "purpose", "day"),
        default="session",
        help="one line per session (default), model, purpose or day",
    )
    usage.add_argument("--since", default=None, help="from this day on: YYYY-MM-DD or Nd")

    config = add(sub, "config", help="configuration helpers")
    config_sub = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    add(config_sub, "check", help="validate the config file; exit 2 on problems")

    add(sub, "init", help="write a config and a workspace with prompt files")

    skills = add(sub, "skills", help="the skills the assistant can use")
    skills_sub = skills.add_subparsers(dest="skills_command", required=True, metavar="ACTION")
    add(skills_sub, "list", help="list skills, whether each is usable, and skipped files")

    cron = add(sub, "cron", help="manage scheduled prompts")
    cron_sub = cron.add_subparsers(dest="cron_command", required=True, metavar="ACTION")
    add(cron_sub, "list", help="list jobs")
    cron_add = add(cron_sub, "add", help="add a job")
    cron_add.add_argument("--name", required=True)
    cron_add.add_argument("--prompt", required=True)
    when = cron_add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="a cron expression, e.g. '0 8 * * mon-fri'")
    when.add_argument("--every", help="an interval, e.g. 30m, 2h, 1d")
    when.add_argument("--at", help="one time, ISO 8601, e.g. 2026-12-24T18:00")
    cron_add.add_argument("--timezone", default=None, help="IANA timezone (default from config)")
    cron_add.add_argument("--target", default="", help="where to deliver, e.g. email:me@x.org")
    cron_rm = add(cron_sub, "remove", help="remove a job")
    cron_rm.add_argument("name")

    mcp = add(sub, "mcp", help="inspect and call MCP servers (no daemon needed)")
    mcp_sub = mcp.add_subparsers(dest="mcp_command", required=True, metavar="ACTION")
    add(mcp_sub, "list", help="connect to each server; print its state and tools")
    mcp_call = add(mcp_sub, "call", help="call one tool of one server")
    mcp_call.add_argument("server")
    mcp_call.add_argument("tool", help="the tool's own name (or <server>__<tool>)")
    mcp_call.add_argument("arguments", nargs="?", default="{}", help="a JSON object")
    return parser


def _load(args: argparse.Namespace) -> Settings:
    return load_settings(args.config)


def _print_config_problems(exc: ConfigError) -> None:
    for problem in exc.problems:
        print(f"config: {problem}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # Output piped into `head` or similar that stopped reading: not an error. Point
        # stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)

    if args.command == "init":
        from squidd.commands.init import init_command

        return init_command(args.config)

    try:
        settings = _load(args)
    except ConfigError as exc:
        _print_config_problems(exc)
        return EXIT_CONFIG

    if args.command == "config":
        from squidd.commands.config_check import check_command

        return check_command(settings, args.config)

    from squidd.log import configure_logging
    from squidd.secrets import known_secrets

    level = settings.logging.level
    interactive = ("chat", "status", "cron", "mcp", "skills", "usage")
    if args.command in interactive and level in ("debug", "info"):
        # Interactive commands print their own output; only problems should interleave.
        level = "warning" if level == "info" else level
    configure_logging(level, settings.logging.format, known_secrets=known_secrets(settings))

    if args.command == "chat":
        from squidd.commands.chat import chat_command

        return chat_command(settings, message=args.message, session=args.session)
    if args.command == "run":
        from squidd.commands.run import run_command

        return run_command(settings)
    if args.command == "status":
        from squidd.commands.status import status_command

        return status_command(settings)
    if args.command == "usage":
        from squidd.commands.usage import usage_command

        return usage_command(settings, by=args.by, since=args.since)
    if args.command == "cron":
        from squidd.commands.cron import cron_command

        return cron_command(settings, args)
    if args.command == "mcp":
        from squidd.commands.mcp import mcp_command

        return mcp_command(
            settings,
            args.mcp_command,
            server=getattr(args, "server", None),
            tool=getattr(args, "tool", None),
            arguments=getattr(args, "arguments", None),
        )
    if args.command == "skills":
        from squidd.commands.skills import skills_command

        return skills_command(settings)
    raise AssertionError(f"unhandled command {args.command}")  # pragma: no cover
