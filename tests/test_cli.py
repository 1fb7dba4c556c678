"""`squidd.cli`: the commands come from one table of modules, each adding its own subparser and
handler; the CLI runs the start-up phases a command asked for and knows no command's name."""

from __future__ import annotations

import argparse
import gc
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


class _Collector:
    """A command that notes whether the garbage collector is on when its handler runs."""

    def __init__(self, start: Start) -> None:
        self.start = start
        self.on: list[bool] = []

    def register(self, commands: Commands) -> None:
        commands.add(
            "collector", help="notes the collector's state", run=self.run, start=self.start
        )

    def run(self, args: argparse.Namespace, settings: Settings | None = None) -> int:
        self.on.append(gc.isenabled())
        return 0


@pytest.mark.parametrize("start", [Start.ARGS, Start.SETTINGS, Start.INTERACTIVE])
def test_a_command_runs_with_the_collector_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: Start
) -> None:
    """Start-up pauses the garbage collector (docs/performance.md); every command but the
    daemon gets it back before its handler runs: `squidd chat` runs turns for hours."""
    command = _Collector(start)
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, command))
    assert cli.main(["collector", "--config", str(_config(tmp_path))]) == 0
    assert command.on == [True]
    assert gc.isenabled()


def test_the_daemon_starts_with_the_collector_paused_and_it_is_back_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`squidd run` resumes the collector at READY=1 itself; a daemon that stops before
    (a refused start) leaves it on."""
    command = _Collector(Start.DAEMON)
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, command))
    assert cli.main(["collector", "--config", str(_config(tmp_path))]) == 0
    assert command.on == [False]
    assert gc.isenabled()


MAIN_PROBE = """
import gc, runpy, sys
seen = []
class Finder:
    def find_spec(self, name, path=None, target=None):
        if name == "squidd.cli":
            seen.append(gc.isenabled())
        return None
sys.meta_path.insert(0, Finder())
sys.argv = ["squidd", "--version"]
try:
    runpy.run_module("squidd", run_name="__main__")
except SystemExit:
    pass
print(seen)
"""


def test_python_m_squidd_pauses_the_collector_before_the_command_modules() -> None:
    probe = run_python("-c", MAIN_PROBE)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip().splitlines()[-1] == "[False]"
