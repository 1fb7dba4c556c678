"""The model's health in plain sight: with the endpoint down, `squidd run` still starts (a
warning naming the cause), and `squidd status` and `squidd doctor` show the model failing
with the cause in words, first from the start-up try, then from a turn that met it."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.support.daemon import run_squidd
from tests.support.spool_daemon import Daemon, drop_message, spool_config, start_ready, wait_until


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_dead_endpoint_shows_in_status_and_doctor(tmp_path: Path, daemons: list[Daemon]) -> None:
    port = _closed_port()
    config = spool_config(tmp_path, f"http://127.0.0.1:{port}/v1")
    daemon = start_ready(tmp_path, config, daemons)
    wait_until(lambda: "model_unreachable_at_start" in daemon.log_text())

    status = run_squidd(config, "status")
    assert status.returncode == 0, status.stderr
    assert "FAILING" in status.stdout
    assert f"connection refused by 127.0.0.1:{port}" in status.stdout
    assert "last answer:  never" in status.stdout

    # A turn meets the same endpoint: its failure (and why) is the model's last failure.
    drop_message(tmp_path / "data", "m1", "hello?")
    wait_until(lambda: "did not answer" in run_squidd(config, "status").stdout, timeout=60)

    doctor = run_squidd(config, "doctor", "--no-llm-call")
    assert doctor.returncode == 1
    [line] = [ln for ln in doctor.stdout.splitlines() if "as the daemon met it" in ln]
    assert line.startswith("✗") and f"connection refused by 127.0.0.1:{port}" in line
    assert daemon.proc.poll() is None  # a warning, never a refusal
