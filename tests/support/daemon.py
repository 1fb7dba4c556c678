"""A `squidd run` child process for the end-to-end tests of the gateway and the channels.

The child gets the test process's environment minus whatever would steer it from outside
the test's config (`SQUIDD_*` settings, a systemd notify socket or watchdog), with the
repository on `PYTHONPATH` so test-only modules (`tests.support.*`) can be loaded. Its
stdout and stderr (JSON log lines) go to a file the test searches. It is stopped by its own
PID only: `stop` sends a signal and waits, `kill` is the fixture's last resort. A child a
test left running (a wait that timed out before the test's own `kill`) is killed after the
test by `kill_leftovers`, which the root conftest calls for every test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0


def daemon_env(**extra: str) -> dict[str, str]:
    """The environment for a `squidd` child process; `extra` is added last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUIDD_")}
    env.pop("NOTIFY_SOCKET", None)
    env.pop("WATCHDOG_USEC", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def squidd_argv(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "squidd", "--config", str(config), *args]


def run_squidd(
    config: Path, *args: str, timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`squidd --config <config> <args>` as a child run to its end, its output captured (a
    failing exit code is for the test to read, not an exception)."""
    return subprocess.run(
        squidd_argv(config, *args),
        env=daemon_env(),
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_python(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python <args>` (e.g. `-c`, a probe's source) in a squidd child's environment, its
    output captured."""
    return subprocess.run(
        [sys.executable, *args],
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_argv(config: Path, channel: str | None = None) -> list[str]:
    """`squidd run`, or with `channel` (`module:function`) the same daemon with that test
    channel handed to the builder (tests/support/run_with_channel.py)."""
    if channel is None:
        return squidd_argv(config, "run")
    launcher = "tests.support.run_with_channel"
    return [sys.executable, "-m", launcher, channel, "--config", str(config)]


SPOOL = "tests.support.spool_channel:create_channel"

HEAD_BYTES = 256
_started: list[DaemonProcess] = []


class DaemonProcess:
    """One `squidd run` child; its output goes to `log_path`. With `channel` (e.g. `SPOOL`)
    that test channel runs beside the configured ones."""

    def __init__(
        self,
        config: Path,
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        channel: str | None = None,
    ):
        self.log_path = log_path
        self._log = log_path.open("w")
        self._log_head = b""  # the log's first bytes, to notice a log started anew
        self._log_read = 0  # bytes of the log parsed into `_parsed` (and `_rest`)
        self._log_rest = b""
        self._log_events: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(
            run_argv(config, channel),
            env=dict(env) if env is not None else daemon_env(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        _started.append(self)

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines (anything else the child printed is skipped).

        Tests poll this every 50 ms while they wait, for minutes at a time: the lines parsed
        before are kept, and only what the child appended since is read and parsed (parsing
        the whole log at each poll was a large share of the suite's CPU). A log started anew
        on the same path (another child's) is read again from its start."""
        if not self._log.closed:
            self._log.flush()
        with self.log_path.open("rb") as handle:
            head = handle.read(len(self._log_head))
            if len(head) < len(self._log_head) or head != self._log_head:
                self._log_head, self._log_read, self._log_rest, self._log_events = b"", 0, b"", []
            handle.seek(self._log_read)
            chunk = handle.read()
        if not self._log_head:
            self._log_head = chunk[:HEAD_BYTES]
        self._log_read += len(chunk)
        lines = (self._log_rest + chunk).split(b"\n")
        self._log_rest = lines.pop()  # a line not ended yet is parsed once it is
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                self._log_events.append(event)
        return list(self._log_events)

    def count(self, event: str) -> int:
        """How many log lines have this event name."""
        return sum(1 for e in self.events() if e.get("event") == event)

    async def wait_log(self, needle: str, count: int = 1, timeout: float = WAIT_S) -> None:
        """Until `needle` occurs `count` times in the log; fails if the child exits first."""
        await self._wait(lambda: self.log_text().count(needle) >= count, repr(needle), timeout)

    async def wait_event(self, event: str, count: int = 1, timeout: float = WAIT_S) -> None:
        """Until `count` log lines have the event name `event`."""
        await self._wait(lambda: self.count(event) >= count, event, timeout)

    async def wait_until(self, done: Any, what: str, timeout: float = WAIT_S) -> None:
        """Until `done()` holds (a check of the log or of a server's record)."""
        await self._wait(done, what, timeout)

    async def _wait(self, done: Any, what: str, timeout: float) -> None:
        # A bound for a broken run, not a speed assertion: the log is foreign state to poll.
        try:
            with anyio.fail_after(timeout):
                while not done():
                    if self.proc.poll() is not None:
                        raise AssertionError(
                            f"squidd exited ({self.proc.returncode}) before {what}:\n"
                            + self.log_text()[-3000:]
                        )
                    await anyio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(
                f"timed out waiting for {what}:\n" + self.log_text()[-3000:]
            ) from None

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send `sig` (if it still runs), wait for the exit; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = await anyio.to_thread.run_sync(lambda: self.proc.wait(timeout=timeout))
        self._log.close()
        return code

    def kill(self) -> None:
        """SIGKILL if it still runs and reap it; safe to call more than once."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._log.close()


def running() -> set[DaemonProcess]:
    """The children started by this process that still run."""
    return {daemon for daemon in _started if daemon.proc.poll() is None}


def kill_leftovers(
    keep: set[DaemonProcess] | frozenset[DaemonProcess] = frozenset(),
) -> list[DaemonProcess]:
    """SIGKILL (and reap) every child but those in `keep` that still runs: left behind by a
    test that failed before stopping it. The ones killed, in the order they were started."""
    left = [daemon for daemon in _started if daemon not in keep and daemon.proc.poll() is None]
    for daemon in [d for d in _started if d not in keep]:
        daemon.kill()
        _started.remove(daemon)
    return left


@pytest.fixture
def daemons() -> Iterator[list[DaemonProcess]]:
    """The `squidd run` children a test appends here, killed by PID at its end."""
    started: list[DaemonProcess] = []
    yield started
    for daemon in started:
        daemon.kill()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """An empty data dir for a channel run in this process."""
    path = tmp_path / "data"
    path.mkdir()
    return path
