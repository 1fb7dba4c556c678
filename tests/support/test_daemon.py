"""`kill_leftovers`: a `squidd run` child a failing test left running does not outlive the
test, and one a wider fixture started before the test is left to that fixture."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import daemon as daemon_module
from tests.support.daemon import DaemonProcess, kill_leftovers, running


@pytest.fixture
def sleeper(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children that only sleep: what is tested is who stops them, not squidd."""
    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    monkeypatch.setattr(daemon_module, "run_argv", lambda config, channel=None: argv)


@pytest.mark.usefixtures("sleeper")
def test_a_child_left_running_is_killed_and_a_kept_one_is_not(tmp_path: Path) -> None:
    kept = DaemonProcess(tmp_path / "none.toml", tmp_path / "kept.log")
    before = running()
    try:
        left = DaemonProcess(tmp_path / "none.toml", tmp_path / "left.log")
        stopped = DaemonProcess(tmp_path / "none.toml", tmp_path / "stopped.log")
        stopped.kill()
        assert kept in before and left in running()
        assert kill_leftovers(keep=before) == [left]
        assert left.proc.poll() is not None
        assert kept.proc.poll() is None
        assert running() == {kept}
    finally:
        kept.kill()
