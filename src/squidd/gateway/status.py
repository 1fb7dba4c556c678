"""The status socket: the running daemon answers on a local socket in its data dir.

`<data dir>/squidd.sock` (mode 0600, inside the owner-only data dir) answers one request per
connection: the client sends one JSON line, `{"op": "status"}` (or nothing and closes its
side), and reads one JSON document back. `status` is uptime, each channel's state, last
traffic, turns in flight and queued, the next cron runs (`squidd status` prints it); other
ops are the channels' operator requests (`control_ops`, e.g. `matrix.verify`), so commands
act through the running daemon instead of opening its state a second time. `ask` is the
client side.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import SocketStream, TaskStatus

from squidd.config import Settings
from squidd.core.ports import ControlOp

log = structlog.get_logger()

SOCKET_NAME = "squidd.sock"
MAX_REQUEST_BYTES = 64 * 1024
REQUEST_READ_S = 10.0
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


def daemon_answers(path: Path) -> bool:
    """Whether a daemon answers on the status socket at `path` now (blocking, <= 1 s)."""
    return _answers(path)


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

    def __init__(
        self,
        path: Path,
        snapshot: Callable[[], Awaitable[dict[str, Any]]],
        ops: Mapping[str, ControlOp] | None = None,
    ) -> None:
        self._path = path
        self._snapshot = snapshot
        self._ops = dict(ops or {})

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
                request = await _read_request(stream)
                answer = await self._answer(request)
                body = json.dumps(answer, ensure_ascii=False).encode() + b"\n"
                with anyio.fail_after(5):
                    await stream.send(body)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, TimeoutError):
                return

    async def _answer(self, request: dict[str, Any] | None) -> dict[str, Any]:
        if request is None:
            return {"error": "the request is not one JSON object"}
        op = request.get("op", "status")
        try:
            if op == "status":
                return await self._snapshot()
            handler = self._ops.get(str(op))
            if handler is None:
                return {"error": f"this daemon answers no request {str(op)[:60]!r}"}
            return await handler(request)
        except Exception as exc:  # one client's question must not stop the daemon
            log.exception("status_request_failed", op=str(op)[:60])
            what = "gather its status" if op == "status" else "answer"
            return {"error": f"the daemon could not {what}: {exc}"}


async def _read_request(stream: SocketStream) -> dict[str, Any] | None:
    """The client's request line; `{}` (status) if it sent nothing before closing its side."""
    data = b""
    with anyio.fail_after(REQUEST_READ_S):
        while b"\n" not in data and len(data) < MAX_REQUEST_BYTES:
            try:
                data += await stream.receive(MAX_REQUEST_BYTES)
            except anyio.EndOfStream:
                break
    line = data.split(b"\n", 1)[0].strip()
    if not line:
        return {}
    try:
        request = json.loads(line)
    except ValueError:
        return None
    return request if isinstance(request, dict) else None


def ask(path: Path, request: Mapping[str, Any], timeout_s: float = 5.0) -> dict[str, Any]:
    """Send one request to the daemon on `path`, return its answer; OSError when no daemon
    answers, ValueError or TypeError for an answer that is no JSON object."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    data = json.loads(b"".join(chunks))
    if not isinstance(data, dict):
        raise TypeError("unexpected answer from the daemon")
    return data
