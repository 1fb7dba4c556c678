"""The data dir of real `squidd` processes started under umask 000 (everyone may read what
they make): after `init`, `cron add`, `chat -m` and a `run` that answered a message, every
directory squidd made is 0700 and every file 0600 — the history, the handled ids, the
SQLite index, the usage ledger, the workspace prompt files alike."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.config import write_daemon_config
from tests.support.daemon import SPOOL, DaemonProcess, daemon_env, run_squidd, squidd_argv
from tests.support.fake_llm import FakeLLM
from tests.support.modes import loose_modes
from tests.support.modes import open_umask as open_umask
from tests.support.spool_channel import write_atomic

pytestmark = pytest.mark.anyio


def test_init_makes_a_private_config_and_workspace(tmp_path: Path, open_umask: None) -> None:
    config = tmp_path / "etc" / "squidd" / "config.toml"
    env = {**daemon_env(), "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "d")}
    done = subprocess.run(
        [*squidd_argv(config), "init"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert loose_modes(tmp_path / "etc") == []
    assert loose_modes(tmp_path / "d") == []


async def test_the_data_dir_is_private_whatever_the_umask(
    tmp_path: Path, fake_llm: FakeLLM, open_umask: None
) -> None:
    config = write_daemon_config(tmp_path, fake_llm.base_url, api_key="sk-test-private-0001")
    data = tmp_path / "data"
    added = run_squidd(config, "cron", "add", "--name", "daily", "--prompt", "hi", "--every", "1d")
    assert added.returncode == 0, added.stderr
    chat = run_squidd(config, "chat", "-m", "hello from the terminal")
    assert chat.returncode == 0, chat.stderr
    assert "echo: hello from the terminal" in chat.stdout

    daemon = DaemonProcess(config, tmp_path / "daemon.log", channel=SPOOL)
    try:
        await daemon.wait_event("daemon_ready")
        os.umask(0o022)  # this test's own spool file, not squidd's
        write_atomic(data / "spool" / "in" / "m1.json", {"session": "s1", "text": "hi there"})
        await daemon.wait_event("reply_sent")
        assert await daemon.stop() == 0
    finally:
        daemon.kill()

    names = {p.name for p in data.iterdir()}
    assert {"sessions", "gateway", "cron", "workspace"} <= names
    assert loose_modes(data, skip="spool") == []
