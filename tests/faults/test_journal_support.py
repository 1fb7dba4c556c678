"""`cut_at` stops the daemon it started even when the scenario fails before the kill point
(a wait that timed out, a message that could not be sent)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.faults.journal_support import Model, cut_at
from tests.support import daemon as daemon_module
from tests.support.daemon import DaemonProcess

pytestmark = pytest.mark.anyio


async def test_the_daemon_is_killed_when_the_scenario_fails_midway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    monkeypatch.setattr(daemon_module, "run_argv", lambda config, channel=None: argv)
    started: list[DaemonProcess] = []
    model = Model("true", slow=1)

    async def start(crash: str) -> DaemonProcess:
        started.append(DaemonProcess(tmp_path / "none.toml", tmp_path / "daemon.log"))
        return started[-1]

    async def send() -> None:
        raise ConnectionError("the mail server went away")

    try:
        with pytest.raises(ConnectionError):
            await cut_at("before_answer", model, tmp_path / "lines", start, send)
        assert started[0].proc.poll() is not None
        assert model.release.is_set()  # a held model request is let go too
    finally:
        started[0].kill()
