"""`squidd.cli`: the commands come from one table of modules, each adding its own subparser and
handler; the CLI runs the start-up phases a command asked for and knows no command's name."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from squidd import cli
from squidd.commands import Commands, Start
from squidd.config import Settings
from squidd.errors import EXIT_CONFIG
from tests.support.cli import logging_back_to_defaults as logging_back_to_defaults
from tests.support.config import data_dir_config
from tests.support.daemon import run_python

COMMANDS_DIR = Path(cli.__file__).parent / "commands"


class _Planted:
    """A command module as a new command would be written: a `register`, a handler."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Path]] = []

    def register(self, commands: Commands) -> None:
        parser = commands.add("planted", help="a command added by one module", run=self.run)
        parser.add_argument("word")

    def run(self, args: argparse.Namespace, settings: Settings) -> int:
        self.seen.append((args.word, settings.storage.data_dir))
        return 7


def _config(tmp_path: Path) -> Path:
    return data_dir_config(tmp_path)


def test_a_new_command_is_one_module_in_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = _Planted()
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, planted))
    assert cli.main(["planted", "hello", "--config", str(_config(tmp_path))]) == 7
    assert planted.seen == [("hello", tmp_path / "data")]


def test_a_bad_config_stops_before_the_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = _Planted()
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, planted))
    bad = tmp_path / "bad.toml"
    bad.write_text("[agents]\nkeep_recent_ratio = 1.5\n")
    assert cli.main(["planted", "hello", "--config", str(bad)]) == EXIT_CONFIG
    assert planted.seen == []
    assert "agents.keep_recent_ratio" in capsys.readouterr().err


def test_a_command_that_starts_before_settings_gets_none_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Path | None] = []

    class Early:
        def register(self, commands: Commands) -> None:
            commands.add("early", help="runs on arguments only", run=self.run, start=Start.ARGS)

        def run(self, args: argparse.Namespace) -> int:
            seen.append(args.config)
            return 0

    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, Early()))
    missing = tmp_path / "not-written-yet.toml"  # loading it would fail with exit 2
    assert cli.main(["early", "--config", str(missing)]) == 0
    assert seen == [missing]


def test_every_command_module_is_in_the_table() -> None:
    """A module that adds a command (it has `register`) is in the table; others in the folder
    are parts of a command (`matrix_verify` adds `matrix verify` for `matrix`)."""
    registering = {
        path.stem
        for path in COMMANDS_DIR.glob("*.py")
        if path.stem != "__init__" and "\ndef register(" in path.read_text()
    }
    assert {module.__name__.rsplit(".", 1)[-1] for module in cli.COMMANDS} == registering


def test_every_command_has_a_handler() -> None:
    """Every leaf of the parser (a command, or an action under one) runs something."""
    parser = cli._parser()
    argvs = {
        ("run",),
        ("chat",),
        ("status",),
        ("usage",),
        ("config", "check"),
        ("init",),
        ("skills", "list"),
        ("cron", "list"),
        ("cron", "remove", "x"),
        ("cron", "add", "--name", "n", "--prompt", "p", "--every", "1h"),
        ("mcp", "list"),
        ("mcp", "call", "server", "tool"),
    }
    for argv in argvs:
        args = parser.parse_args(list(argv))
        assert callable(args.run) and isinstance(args.start, Start), argv


PROBE = """
import json, sys
from squidd.cli import _parser
_parser().parse_args(["status"])
print(json.dumps(sorted(m for m in ("openai", "httpx2", "nio", "aioimaplib", "aiosmtplib", "mcp")
                        if m in sys.modules)))
"""


def test_building_the_parser_loads_no_adapter_library() -> None:
    """Every command module is imported to build the parser: `squidd status` or `squidd usage`
    must not pay for the LLM client or the Matrix library that `squidd run` loads."""
    probe = run_python("-c", PROBE)
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == []
