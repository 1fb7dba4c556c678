"""`squidd status`: the running daemon answers on a local socket in its data dir.

The daemon serves one JSON document per connection on `<data dir>/squidd.sock` (mode 0600,
inside the owner-only data dir); `squidd status` reads it and prints what a user asks when
something seems wrong: uptime, each channel's state, last traffic, turns in flight and
queued, the next cron runs. When no daemon answers it says so and exits 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
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


# --- the client: `squidd status` -------------------------------------------------------------


def fetch_status(path: Path, timeout_s: float = 5.0) -> dict[str, Any]:
    """Read the daemon's status document; OSError when no daemon answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(path))
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    data = json.loads(b"".join(chunks))
    if not isinstance(data, dict):
        raise TypeError("unexpected status document")
    return data


def _ago(iso: str | None, now: datetime) -> str:
    if not iso:
        return "never"
    when = datetime.fromisoformat(iso)
    return f"{_duration((now - when).total_seconds())} ago"


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def format_status(data: dict[str, Any], now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    lines = [
        f"squidd {data.get('version', '?')} running, pid {data.get('pid')}, "
        f"up {_duration(float(data.get('uptime_s', 0)))}"
    ]
    lines.append("channels and loops:")
    for child in data.get("children", []):
        state = child["state"]
        detail = f" - {child['detail']}" if child.get("detail") else ""
        lines.append(
            f"  {child['name']:<10} {state:<12} since {_ago(child.get('since'), now)}{detail}"
        )
        if child.get("kind") == "channel":
            lines.append(
                f"  {'':<10} last in {_ago(child.get('last_inbound'), now)}, "
                f"last out {_ago(child.get('last_outbound'), now)}, "
                f"restarts {child.get('restarts', 0)}"
            )
    turns = data.get("turns", {})
    lines.append(
        f"turns: {turns.get('in_flight', 0)} in flight, {turns.get('queued', 0)} queued, "
        f"{turns.get('sessions', 0)} active sessions; "
        f"{data.get('outbox', 0)} replies waiting for delivery"
    )
    cron = data.get("cron")
    if cron is None:
        lines.append("cron: off")
    elif not cron:
        lines.append("cron: no jobs")
    else:
        lines.append("next cron runs:")
        for job in cron:
            target = job.get("target") or "(history only)"
            lines.append(
                f"  {job['name']:<16} {job.get('next_run') or '-'}  {job['schedule']}  -> {target}"
            )
    heartbeat = data.get("heartbeat")
    lines.append(f"heartbeat: next {heartbeat}" if heartbeat else "heartbeat: off")
    return "\n".join(lines)


def status_command(settings: Settings) -> int:
    path = socket_path(settings)
    try:
        data = fetch_status(path)
    except (OSError, ValueError, TypeError):
        print(f"squidd is not running (no daemon answers on {path})", file=sys.stderr)
        return 1
    if "error" in data:
        print(f"squidd is running but says: {data['error']}", file=sys.stderr)
        return 1
    print(format_status(data))
    return 0
