"""Command-line parsing only. The commands are the modules of the table `COMMANDS`; each
adds its own subparser and handler (`squidd.commands`), and nothing here knows a command's
name. Start-up happens in phases (args, settings, logging, validation, event loop), as far
as the command asked (`Start`), so a bad config fails fast with its own exit code.

Exit codes: 0 ok, 1 runtime failure, 2 configuration error (systemd does not restart on it).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO, cast

from squidd import __version__
from squidd.commands import (
    CommandModule,
    Commands,
    Start,
    audit,
    backup,
    chat,
    config_check,
    cron,
    doctor,
    init,
    matrix,
    mcp,
    memory,
    models,
    parked,
    pause_collection,
    resume_collection,
    rooms,
    run,
    run_marking_new_data_dir,
    skills,
    status,
    usage,
)
from squidd.config import Settings, load_settings
from squidd.errors import EXIT_CONFIG, EXIT_OK, ConfigError
from squidd.fs import private_umask

COMMANDS_LOG = "commands.log"

# The commands, in the order `squidd --help` lists them. A new command is one module with a
# `register` and one line here.
COMMANDS: tuple[CommandModule, ...] = (
    run,
    chat,
    status,
    parked,
    audit,
    usage,
    backup,
    memory,
    config_check,
    doctor,
    models,
    init,
    skills,
    cron,
    mcp,
    matrix,
    rooms,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="squidd", description="A personal AI assistant daemon.")
    parser.add_argument("--version", action="version", version=f"squidd {__version__}")
    parser.add_argument(
        "--config", type=Path, default=None, help="config file (default: see docs/configuration.md)"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="show log lines on stderr (every command)"
    )
    # --config is accepted before or after the command (`squidd config check --config X`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", type=Path, default=argparse.SUPPRESS, help="config file")
    common.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show log lines on stderr (otherwise they go to the data dir's commands.log)",
    )
    group = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = Commands(group, common)
    for module in COMMANDS:
        module.register(commands)
    return parser


def _print_config_problems(exc: ConfigError) -> None:
    for problem in exc.problems:
        print(f"config: {problem}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    # Start-up runs with the garbage collector paused (squidd.commands.pause_collection);
    # it is back on before any handler runs, except `run`'s, which resumes it at READY=1.
    pause_collection()
    try:
        return _main(argv)
    except BrokenPipeError:
        # Output piped into `head` or similar that stopped reading: not an error. Point
        # stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    finally:
        resume_collection()


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    # Every command runs owner-only: whatever it (or a library) creates is private.
    with private_umask():
        return _command(args)


def _command(args: argparse.Namespace) -> int:
    begin: Start = args.start
    if begin is not Start.DAEMON:
        resume_collection()  # the daemon resumes it once started (commands/run.py)
    if begin is Start.ARGS:
        return int(args.run(args))

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        _print_config_problems(exc)
        return EXIT_CONFIG
    if begin is not Start.SETTINGS:
        _configure_logging(settings, quiet=begin is Start.INTERACTIVE and not args.verbose)
    return run_marking_new_data_dir(args, settings)


def _configure_logging(settings: Settings, *, quiet: bool) -> None:
    """The daemon (and `--verbose`) log to stderr; a command that prints its own output
    logs to `commands.log` in the data dir (nowhere when there is none yet), so its one
    human line per outcome is all the terminal shows."""
    from squidd.log import configure_logging
    from squidd.secrets import known_secrets

    level = settings.logging.level
    stream = None
    if quiet:
        stream = _command_log(settings.storage.data_dir)
        fmt = "json"
    else:
        fmt = settings.logging.format
    configure_logging(level, fmt, known_secrets=known_secrets(settings), stream=stream)


def _command_log(data_dir: Path) -> TextIO:
    """`commands.log` in the data dir, appended to (private); an empty sink without one."""
    if data_dir.is_dir():
        return cast(TextIO, _AppendingLog(data_dir / COMMANDS_LOG))
    return io.StringIO()


class _AppendingLog:
    """A write-only text stream that appends each write to a private file, opened and closed
    per write: no handle outlives a command run in-process, and a file that cannot be
    written loses the log line, never the command."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def write(self, text: str) -> int:
        from squidd.fs import open_private, write_all

        try:
            fd = open_private(self._path, os.O_WRONLY | os.O_APPEND)
        except OSError:
            return len(text)
        try:
            write_all(fd, text.encode("utf-8", "backslashreplace"))
        except OSError:
            pass
        finally:
            os.close(fd)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
