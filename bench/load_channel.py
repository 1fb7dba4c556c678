"""A loopback load channel for benchmarks that drive a real `squidd run` process.

Handed to the daemon's builder by `tests/support/run_with_channel.py` (`run_argv`), with the
repository root on PYTHONPATH. It listens on 127.0.0.1 on a free port and writes the port
to `<data dir>/load/port` once it listens. A client sends one JSON object per line:

    {"id": "m1", "session": "s1", "text": "hello"}      a message (source id, session, text)
    {"cmd": "snapshot", "path": "/abs/file"}             dump a tracemalloc snapshot there
                                                         (only when the daemon traces)
    {"cmd": "gc"}                                        run a full garbage collection
    {"cmd": "trim"}                                      give the C heap's free pages back
                                                         (glibc's malloc_trim)

and gets lines back on the same connection:

    {"reply": "m1", "text": "..."}   the reply to message m1 was sent
    {"ack": "m1"}                    m1 is handled (recorded, acknowledged)
    {"snapshot": "/abs/file"}        or {"snapshot": null, "error": "..."}
    {"gc": 123}                      the objects the collection found unreachable
    {"trim": true}                   whether malloc_trim released memory (null: no glibc)

`gc` and `trim` tell live memory from memory the process holds but does not use: a growth
that a full collection takes back was garbage waiting in the oldest generation; one that
`trim` takes back was free space kept by the allocator.

Nothing is kept per message beyond the time it is in flight (a source id -> connection map
entry dropped at the acknowledgement), so the channel itself does not grow with the number
of turns it carries: a memory benchmark measures the daemon, not its load generator.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.abc import TaskStatus
from anyio.streams.buffered import BufferedByteReceiveStream

from squidd.config import Settings
from squidd.core.models import Inbound, Outbound, SessionId
from squidd.core.ports import ChannelState, Inbox
from squidd.errors import DeliveryError

MAX_LINE = 1 << 20


class _Connection:
    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.lock = anyio.Lock()

    async def write(self, data: dict[str, Any]) -> None:
        async with self.lock:
            await self.stream.send(json.dumps(data).encode() + b"\n")


class LoadChannel:
    def __init__(self, root: Path, *, name: str = "load") -> None:
        self._root = root
        self._name = name
        self._waiting: dict[str, _Connection] = {}

    @property
    def name(self) -> str:
        return self._name

    async def run(self, inbox: Inbox, *, task_status: TaskStatus[None]) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio, not Django
        root = anyio.Path(self._root)
        await root.mkdir(parents=True, exist_ok=True)
        tmp = root / "port.tmp"
        await tmp.write_text(str(port))
        await tmp.rename(root / "port")
        task_status.started()
        inbox.report(ChannelState.CONNECTED, f"127.0.0.1:{port}")

        async def serve(stream: anyio.abc.SocketStream) -> None:
            await self._serve(stream, inbox)

        async with listener:
            await listener.serve(serve)

    async def _serve(self, stream: anyio.abc.SocketStream, inbox: Inbox) -> None:
        conn = _Connection(stream)
        lines = BufferedByteReceiveStream(stream)
        async with stream:
            while True:
                try:
                    line = await lines.receive_until(b"\n", MAX_LINE)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                    return
                data = json.loads(line)
                if data.get("cmd") == "snapshot":
                    await conn.write(await self._snapshot(str(data["path"])))
                    continue
                if data.get("cmd") == "gc":
                    await conn.write({"gc": gc.collect()})
                    continue
                if data.get("cmd") == "trim":
                    await conn.write({"trim": _malloc_trim()})
                    continue
                await inbox.put(self._inbound(conn, data))

    @staticmethod
    async def _snapshot(path: str) -> dict[str, Any]:
        if not tracemalloc.is_tracing():
            return {"snapshot": None, "error": "tracemalloc is not tracing (PYTHONTRACEMALLOC)"}
        snapshot = tracemalloc.take_snapshot()
        await anyio.to_thread.run_sync(snapshot.dump, path)
        return {"snapshot": path}

    def _inbound(self, conn: _Connection, data: dict[str, Any]) -> Inbound:
        source_id = str(data["id"])
        self._waiting[source_id] = conn

        async def ack() -> None:
            waiting = self._waiting.pop(source_id, None)
            if waiting is not None:
                await waiting.write({"ack": source_id})

        return Inbound(
            channel=self._name,
            source_id=source_id,
            session_id=SessionId(str(data.get("session", "load"))),
            sender=str(data.get("sender", "bench")),
            text=str(data["text"]),
            ack=ack,
        )

    async def send(self, outbound: Outbound) -> None:
        source = outbound.in_reply_to.source_id if outbound.in_reply_to else None
        conn = self._waiting.get(source) if source is not None else None
        if conn is None:
            return  # a scheduled run or a client gone: nobody to tell
        try:
            await conn.write({"reply": source, "text": outbound.text})
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise DeliveryError(f"load client gone: {exc}") from exc


def _malloc_trim() -> bool | None:
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc
    return bool(trim(0))


def create_channel(settings: Settings) -> LoadChannel:
    return LoadChannel(settings.storage.data_dir / "load")
