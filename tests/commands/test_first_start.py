"""A first start on a fresh machine says what it needs: `run` with no config (or with no
channel and no model) names the set-up in one line and exits non-zero; `config check` tells
"no file" apart from "ok"; every command's `--help` describes it and shows an example."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from pathlib import Path

from squidd import cli
from squidd.errors import EXIT_CONFIG
from tests.support.daemon import daemon_env, squidd_argv


def _fresh(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`squidd ARGS` as a new user runs it: a HOME with nothing in it, no `--config`."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = daemon_env(HOME=str(home))
    env.pop("XDG_CONFIG_HOME", None)
    return subprocess.run(
        [sys.executable, "-m", "squidd", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_run_with_no_config_names_the_set_up_in_one_line(tmp_path: Path) -> None:
    done = _fresh(tmp_path, "run")
    assert done.returncode == EXIT_CONFIG
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "no config file found" in lines[0]
    assert "squidd init --interactive" in lines[0]
    # Nothing was started and nothing made in the new HOME's data dir.
    assert not (tmp_path / "home" / ".local").exists()


def test_run_with_no_channel_and_no_model_is_refused_unless_allowed(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[storage]\ndata_dir = "{tmp_path / "data"}"\n')
    done = subprocess.run(
        squidd_argv(config, "run"),
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == EXIT_CONFIG
    [line] = done.stderr.splitlines()
    assert "no channel" in line and "no model" in line
    assert "squidd init --interactive" in line and "gateway.allow_empty" in line


def test_config_check_without_a_file_is_not_ok(tmp_path: Path) -> None:
    done = _fresh(tmp_path, "config", "check")
    assert done.returncode == 1
    assert "config ok" not in done.stdout + done.stderr
    assert "no config file found" in done.stderr
    assert "squidd init --interactive" in done.stderr


def _leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.extend(_leaves(sub, (*path, name)))
    return found


def test_every_command_help_has_a_description_and_an_example() -> None:
    parsers = _leaves(cli._parser())[1:]
    assert len(parsers) > 25  # every command and every action under one
    for path, parser in parsers:
        text = parser.format_help()
        assert parser.description, path
        assert parser.description in text.replace("\n", " ") or parser.description[:20] in text
        assert "example:\n  squidd " in text, path
        example = text.split("example:\n", 1)[1]
        assert f"squidd {path[0]}" in example, path


def test_chat_against_a_dead_endpoint_prints_exactly_one_line(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "config.toml"
    config.write_text(
        f'[llm]\nbase_url = "http://127.0.0.1:{port}/v1"\napi_key = "sk-test-first-start"\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n'
    )
    (tmp_path / "data").mkdir(mode=0o700)
    done = subprocess.run(
        squidd_argv(config, "chat", "-m", "hi"),
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert f"connection refused by 127.0.0.1:{port}" in line
    # The log lines went to the data dir's log, not to the terminal.
    assert "llm_retry" in (tmp_path / "data" / "commands.log").read_text()
