"""The status socket: the running daemon answers on a local socket in its data dir.

The daemon serves one JSON document per connection on `<data dir>/squidd.sock` (mode 0600,
inside the owner-only data dir): uptime, each channel's state, last traffic, turns in flight
and queued, the next cron runs. `squidd status` (commands/status.py) reads and prints it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import SocketStream, TaskStatus

from squidd.config import Settings

log = structlog.get_logger()

SOCKET_NAME = "squidd.sock"
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes including the terminating NUL


def socket_path(settings: Settings) -> Path:
    return settings.storage.data_dir / SOCKET_NAME


def check_socket_path(path: Path) -> str | None:
    """A problem with the socket path (too long for AF_UNIX), or None."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        return (
            f"the status socket path {path} is longer than {MAX_SOCKET_PATH} bytes; "
            "choose a shorter storage.data_dir"
        )
    return None


class DaemonAlreadyRunningError(RuntimeError):
    pass


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True


class StatusServer:
    """Serves `snapshot()` as JSON to each client of the unix socket."""

    def __init__(self, path: Path, snapshot: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self._path = path
        self._snapshot = snapshot

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        if await anyio.to_thread.run_sync(_answers, self._path):
            raise DaemonAlreadyRunningError(
                f"another squidd daemon answers on {self._path}; one daemon per data dir"
            )
        await anyio.Path(self._path.parent).mkdir(parents=True, exist_ok=True, mode=0o700)
        old_umask = os.umask(0o177)  # the socket file is created 0600
        try:
            listener = await anyio.create_unix_listener(self._path)
        finally:
            os.umask(old_umask)
        try:
            await anyio.Path(self._path).chmod(0o600)
            log.info("status_socket_listening", path=str(self._path))
            task_status.started()
            async with listener:
                await listener.serve(self._handle)
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(OSError):
                await anyio.Path(self._path).unlink()

    async def _handle(self, stream: SocketStream) -> None:
        async with stream:
            try:
                try:
                    snapshot = await self._snapshot()
                except Exception as exc:  # one client's question must not stop the daemon
                    log.exception("status_snapshot_failed")
                    snapshot = {"error": f"the daemon could not gather its status: {exc}"}
                body = json.dumps(snapshot, ensure_ascii=False).encode() + b"\n"
                with anyio.fail_after(5):
                    await stream.send(body)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, TimeoutError):
                return
