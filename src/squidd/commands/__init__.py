"""One module per CLI command; each adds its own subparser and handler.

A command module has `register(commands: Commands) -> None`, which adds its subparser with
`commands.add(name, run=handler, start=...)` (and its own arguments and actions). `squidd.cli`
calls `register` for every module of its explicit table, parses, then runs the start-up
phases the command asked for and calls `args.run`. Adding a command is one new module and
one line in that table; nothing registers itself at import time.

The parser is built from every command module, so a module imports its heavy parts (the
runtime, the daemon, the LLM client) inside its handler: `squidd status` must not pay for
what `squidd run` loads. Nothing but `squidd.cli` imports this package.
"""

from __future__ import annotations

import argparse
import enum
import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from squidd.config import Settings

__all__ = [
    "CommandModule",
    "Commands",
    "Start",
    "pause_collection",
    "resume_collection",
    "run_marking_new_data_dir",
]


class Start(enum.Enum):
    """How far start-up goes before the handler runs, and what the handler is given."""

    ARGS = "args"
    """Arguments only, no settings loaded: `run(args)` (`init` writes the config it loads)."""
    SETTINGS = "settings"
    """Settings loaded and validated, logging untouched: `run(args, settings)`."""
    DAEMON = "daemon"
    """Settings, then logging at the configured level: `run(args, settings)`."""
    INTERACTIVE = "interactive"
    """Settings, then logging at warning or quieter (the command prints its own output;
    only problems should interleave): `run(args, settings)`."""


@dataclass(frozen=True)
class Commands:
    """Where a command module adds itself: a subparsers group and the options every command
    accepts after its name (`squidd config check --config X`)."""

    group: argparse._SubParsersAction[argparse.ArgumentParser]
    common: argparse.ArgumentParser

    def add(
        self,
        name: str,
        *,
        help: str,
        run: Callable[..., int] | None = None,
        start: Start = Start.INTERACTIVE,
        example: str = "",
        **kwargs: Any,
    ) -> argparse.ArgumentParser:
        """A subparser for `name`; `run` is its handler (None for a group of actions). Its
        `--help` opens with `description` (the one-line `help` as a sentence when none is
        given) and ends with `example`, one command per line."""
        kwargs.setdefault("description", _sentence(help))
        if example:
            lines = "\n".join(f"  {line}" for line in example.splitlines())
            kwargs.setdefault("epilog", f"example:\n{lines}")
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        parser = self.group.add_parser(name, parents=[self.common], help=help, **kwargs)
        parser.set_defaults(start=start)
        if run is not None:
            parser.set_defaults(run=run)
        return parser

    def actions(self, parser: argparse.ArgumentParser, dest: str) -> Commands:
        """The actions under a command (`cron list|add|remove`), each added with `add`."""
        group = parser.add_subparsers(dest=dest, required=True, metavar="ACTION")
        return Commands(group, self.common)


def _sentence(text: str) -> str:
    text = text.strip()
    return f"{text[:1].upper()}{text[1:]}{'' if text.endswith('.') else '.'}"


def pause_collection() -> None:
    """The cyclic garbage collector off while a command starts.

    Importing squidd's modules and building the daemon make a few hundred thousand objects
    that live as long as the process (classes, pydantic's schemas and validators, functions,
    the settings). Each young-generation collection walks what was made since the last one
    and each full one everything: about 150 collections, a fifth of `squidd run`'s CPU to
    READY=1, spent finding almost nothing (a few thousand objects of garbage in all,
    docs/performance.md). `squidd.cli.main` pauses it first thing (`python -m squidd` even
    before the command modules are imported) and resumes it before a command's handler
    runs; `squidd run` resumes it once READY=1 is sent (`resume_collection(freeze=True)`).
    """
    gc.disable()


def resume_collection(*, freeze: bool = False) -> None:
    """The collector back on. With `freeze`, what start-up left is collected once and the
    survivors are moved out of the generations the collector scans (`gc.freeze`): they
    live as long as the daemon, and a full collection later (during a turn) then walks only
    what was made after start-up, not the start-up's objects again each time."""
    if freeze:
        gc.collect()
        gc.freeze()
    gc.enable()


class CommandModule(Protocol):
    """What `squidd.cli`'s table holds: a module that adds its own command."""

    def register(self, commands: Commands) -> None: ...


def run_marking_new_data_dir(args: argparse.Namespace, settings: Settings) -> int:
    """Run a command given settings; a data dir that was new before it and exists after it
    (made by `cron add`, `backup create`, ...) is then marked with the current format
    (store/format.py), so `run` does not take it for one from before the marker."""
    import sys

    from squidd import __version__
    from squidd.errors import StorageError
    from squidd.store.format import mark_made, read_format

    data_dir = settings.storage.data_dir
    try:
        new = read_format(data_dir) is None
    except StorageError:
        new = False  # a damaged marker: left for the command (and `run`) to name
    try:
        return int(args.run(args, settings))
    finally:
        if new:
            try:
                mark_made(data_dir, squidd=__version__)
            except OSError as exc:
                print(f"squidd: cannot mark {data_dir}: {exc.strerror or exc}", file=sys.stderr)
