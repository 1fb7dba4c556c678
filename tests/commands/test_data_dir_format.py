"""A data dir is marked with its format version by whichever command makes it: each command
is run as `squidd` on a config whose data dir does not exist yet; afterwards the data dir
either still does not exist (a command that only reads) or holds `format.json` with the
current format, and a `squidd run` on it then starts without taking it for format 1 (no
backup before a migration, no migration)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from squidd.store.format import CURRENT, MARKER, read_format
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess, daemon_env, run_squidd, squidd_argv
from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.anyio

# The commands that make the data dir, and those that only read it (it stays missing).
# `backup create` writes outside the data dir (~/squidd-backups), so it makes none.
MAKING = {
    "chat -m": ["chat", "-m", "hello"],
    "cron add": ["cron", "add", "--name", "daily", "--prompt", "hi", "--every", "1d"],
}
READING = {
    "cron list": ["cron", "list"],
    "parked list": ["parked", "list"],
    "usage": ["usage"],
    "audit": ["audit"],
    "status": ["status"],
    "skills list": ["skills", "list"],
}


def _marked_current(data: Path) -> None:
    assert data.is_dir()
    marker = json.loads((data / MARKER).read_text())
    assert marker["format"] == CURRENT, marker
    assert read_format(data) == CURRENT


async def _run_takes_it_as_current(config: Path, data: Path, log: Path) -> None:
    daemon = DaemonProcess(config, log)
    try:
        await daemon.wait_event("daemon_ready")
        assert await daemon.stop() == 0
    finally:
        daemon.kill()
    assert daemon.count("data_dir_backed_up") == 0 and daemon.count("data_dir_migrated") == 0
    assert not list(data.glob("backups/pre-format-*"))
    _marked_current(data)


@pytest.mark.parametrize("command", sorted(MAKING))
async def test_a_data_dir_made_by_a_command_is_marked_current(
    tmp_path: Path, fake_llm: FakeLLM, command: str
) -> None:
    config = write_daemon_config(tmp_path, fake_llm.base_url, api_key="sk-test-format-0001")
    data = tmp_path / "data"
    done = run_squidd(config, *MAKING[command])
    assert done.returncode == 0, done.stderr
    _marked_current(data)
    assert len(list(data.iterdir())) > 1  # the command's own state beside the marker
    await _run_takes_it_as_current(config, data, tmp_path / "run.log")


@pytest.mark.parametrize("command", sorted(READING))
def test_a_command_that_only_reads_makes_no_data_dir(
    tmp_path: Path, fake_llm: FakeLLM, command: str
) -> None:
    config = write_daemon_config(tmp_path, fake_llm.base_url, api_key="sk-test-format-0002")
    data = tmp_path / "data"
    run_squidd(config, *READING[command])
    if data.exists():  # made after all: then marked like any other
        _marked_current(data)


def test_init_marks_the_data_dir_it_makes(tmp_path: Path) -> None:
    config = tmp_path / "etc" / "config.toml"
    env = {**daemon_env(), "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    done = subprocess.run(
        [*squidd_argv(config), "init"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    data = tmp_path / "xdg" / "squidd"
    _marked_current(data)
    assert (data / "api" / "keys").exists()
