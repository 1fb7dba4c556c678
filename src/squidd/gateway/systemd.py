"""The systemd notify protocol without a dependency: datagrams to `$NOTIFY_SOCKET`.

`READY=1` once every child was started, `STATUS=...` lines, `WATCHDOG=1` from the event
loop (so a wedged loop gets the service restarted), `STOPPING=1` at shutdown. Outside
systemd (no `$NOTIFY_SOCKET`) every call is a no-op.
"""

from __future__ import annotations

import os
import socket

import anyio
import structlog

log = structlog.get_logger()


class Notifier:
    """Sends notify datagrams; a failure is logged once and never stops the daemon."""

    def __init__(self, address: str | None = None) -> None:
        raw = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        # A leading '@' names a socket in the abstract namespace.
        self._address = "\0" + raw[1:] if raw.startswith("@") else raw
        self._sock: socket.socket | None = None
        self._warned = False

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def notify(self, *lines: str) -> bool:
        """Send `lines` in one datagram; a unix datagram send does not block the loop."""
        if not self._address:
            return False
        payload = "\n".join(lines).encode("utf-8")
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            self._sock.sendto(payload, self._address)
        except OSError as exc:
            if not self._warned:
                log.warning("sd_notify_failed", reason=exc.strerror or str(exc))
                self._warned = True
            return False
        return True

    def ready(self, status: str) -> None:
        self.notify("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def status(self, status: str) -> None:
        self.notify(f"STATUS={status}")

    def stopping(self, status: str = "stopping") -> None:
        self.notify("STOPPING=1", f"STATUS={status}")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def watchdog_interval_s() -> float | None:
    """Half the `WatchdogSec=` systemd asked for, when it asked this process."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    return value / 2_000_000 if value > 0 else None


async def watchdog(notifier: Notifier, interval_s: float) -> None:
    """Ping the watchdog from the event loop: it stops when the loop is stuck."""
    while True:
        notifier.notify("WATCHDOG=1")
        await anyio.sleep(interval_s)
