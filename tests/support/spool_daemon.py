"""`squidd run` as a real process with the test-only spool channel: a child with its own
systemd notify socket (read continuously, as systemd does), messages dropped into the spool
and replies read from it, and a poll for a condition with a bound."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.config import write_daemon_config
from tests.support.daemon import SPOOL, DaemonProcess, daemon_env
from tests.support.spool_channel import write_atomic

GRACE_S = 5


def spool_config(tmp: Path, llm_url: str, **sections: Mapping[str, Any]) -> Path:
    """The spool daemon's config: a short grace period, a quick cron poll, `sections`."""
    return write_daemon_config(
        tmp,
        llm_url,
        api_key="sk-test-run-process-key-1234",
        gateway={"shutdown_grace_s": GRACE_S},
        cron={"poll_s": 0.2},
        **sections,
    )


def env_for(notify: Path | None = None) -> dict[str, str]:
    return daemon_env(NOTIFY_SOCKET=str(notify)) if notify is not None else daemon_env()


class Daemon(DaemonProcess):
    """A `squidd run` child process with its notify socket."""

    def __init__(self, tmp: Path, config: Path, **env: str) -> None:
        self.notify_path = tmp / f"n{uuid.uuid4().hex[:6]}.sock"
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        super().__init__(
            config,
            tmp / f"daemon-{uuid.uuid4().hex[:6]}.log",
            env={**env_for(self.notify_path), **env},
            channel=SPOOL,
        )
        self.messages: list[str] = []
        # Read continuously, as systemd does: a full datagram queue would drop notifications.
        self.closing = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        self.notify.settimeout(0.2)
        while not self.closing.is_set():
            try:
                self.messages.append(self.notify.recv(4096).decode())
            except TimeoutError:
                continue
            except OSError:
                return

    def wait_for_notify(self, needle: str) -> list[str]:
        wait_until(lambda: any(needle in m.splitlines() for m in list(self.messages)))
        return list(self.messages)

    def terminate(self) -> int:
        """SIGTERM, as systemd stops it; its exit code, waited for within the grace period."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=GRACE_S + 10)

    def close(self) -> None:
        """Kill the process if it still runs; stop reading notifications."""
        self.kill()
        self.closing.set()
        self.reader.join(timeout=5)
        self.notify.close()


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    """The children a test starts, killed at its end; their notify sockets closed."""
    started: list[Daemon] = []
    yield started
    for daemon in started:
        daemon.close()


def start_ready(tmp: Path, config: Path, daemons: list[Daemon], **env: str) -> Daemon:
    """A child started (kept in `daemons`) and waited for until it tells systemd READY=1."""
    daemon = Daemon(tmp, config, **env)
    daemons.append(daemon)
    daemon.wait_for_notify("READY=1")
    return daemon


def drop_message(data: Path, message_id: str, text: str, session: str = "spool-s1") -> None:
    write_atomic(
        data / "spool" / "in" / f"{message_id}.json",
        {"session": session, "sender": "tester", "text": text},
    )


def ask(data: Path, message_id: str, text: str) -> list[dict[str, str]]:
    """Drop a message into the spool and wait for its replies (a bound); the replies."""
    drop_message(data, message_id, text)
    wait_until(lambda: replies(data, message_id))
    return replies(data, message_id)


def replies(data: Path, message_id: str) -> list[dict[str, str]]:
    out = data / "spool" / "out"
    if not out.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(out.glob(f"{message_id}.*.json"))]


def wait_until(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.05)
