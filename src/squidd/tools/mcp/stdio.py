"""The stdio transport of an MCP server: the SDK's client session over squidd's own reader.

The SDK's stdio transport joins every chunk of the server's stdout to what it holds of the
current line and splits the whole again (`(buffer + chunk).split("\\n")`): a line of n bytes
costs O(n²) and has no size limit, so one 20 MB answer keeps the event loop busy for seconds
and a runaway server can fill the memory. It also refuses a whole message over one JSON
`\\ud800` escape (a lone surrogate, which pydantic's JSON parser rejects), so that call hangs
until its timeout. This transport keeps the SDK's message types and its session
(`ClientSession` reads and writes `SessionMessage`s on the two streams it yields) and
replaces the pipe handling:

- `LineSplitter` holds at most `max_message_bytes` (plus one read) of the current line and
  scans each byte for the newline once: linear in the output, bounded in memory. A longer
  line is refused: its bytes are dropped as they come, a warning names its size and the
  limit, and when it was an answer to one of our requests (`"id": N, "result"` or `"error"`
  at its start) that request gets a JSON-RPC error saying so at once, instead of waiting for
  its timeout.
- `parse_message` reads a line as JSON-RPC; what pydantic's parser refuses is read again
  with the standard library's (which takes lone surrogates), made valid text
  (`squidd.text.clean_data`) and validated. What is still not JSON-RPC is handed on as the
  exception, which the connection logs and drops.
- Start and stop follow the SDK's: the server in its own process group, stdin closed first,
  then SIGTERM to the group, then SIGKILL, each wait bounded.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TextIO

import anyio
import mcp_types as types
import structlog
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from squidd.config.mcp import McpServerSettings
from squidd.text import clean_data

log = structlog.get_logger()

__all__ = ["LineSplitter", "LineTooLong", "parse_message", "stdio_transport"]

_HEAD_BYTES = 512  # kept of a refused line, to find the request it answers
_READ_BYTES = 64 * 1024
_STOP_WAIT_S = 2.0  # for the server to exit after its stdin closed, and again after SIGTERM
_FLUSH_WAIT_S = 0.5
_POLL_S = 0.01
# An answer's id, as JSON-RPC writers put it: first (or after "jsonrpc"), then its result.
_ANSWER_ID = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")'
    rb'\s*,\s*"(?:result|error)"'
)

Incoming = SessionMessage | Exception


@dataclass(frozen=True, slots=True)
class LineTooLong:
    """A line over the limit: its first bytes (to find whom it answers) and its size."""

    head: bytes
    size: int


class LineSplitter:
    """Newline-delimited messages out of a byte stream, holding at most `max_bytes` of a line.

    Each byte is scanned for the newline once and copied a bounded number of times, so a
    line of n bytes costs O(n); a line over `max_bytes` is dropped as it arrives and
    reported once, as a `LineTooLong`, when its newline comes.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline
        self._dropped = 0  # bytes of an over-long line already thrown away
        self._head = b""

    @property
    def held(self) -> int:
        """Bytes of the current line held in memory (never much over `max_bytes`)."""
        return len(self._buffer)

    def feed(self, chunk: bytes) -> list[bytes | LineTooLong]:
        out: list[bytes | LineTooLong] = []
        self._buffer += chunk
        while (end := self._buffer.find(b"\n", self._scanned)) >= 0:
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]  # CPython drops a bytearray's front without copying
            self._scanned = 0
            size = self._dropped + len(line)
            if self._dropped or size > self._max:
                out.append(LineTooLong(self._head or line[:_HEAD_BYTES], size))
                self._dropped, self._head = 0, b""
            else:
                out.append(line)
        self._scanned = len(self._buffer)
        if len(self._buffer) > self._max:
            if not self._dropped:
                self._head = bytes(self._buffer[:_HEAD_BYTES])
            self._dropped += len(self._buffer)
            self._buffer.clear()
            self._scanned = 0
        return out


def parse_message(line: bytes) -> Incoming:
    """One line as a JSON-RPC message, or the exception that says why it is not one."""
    text = line.decode("utf-8", "replace")
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValidationError as exc:
        first = exc
    # pydantic's JSON parser refuses a lone surrogate escape; the standard library's reads
    # it, and the cleaning makes it valid text.
    try:
        data = clean_data(json.loads(text))
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(data, by_name=False))
    except (ValueError, RecursionError):
        return first


def refusal(item: LineTooLong, limit: int) -> types.JSONRPCError | None:
    """The error answer for the request a refused line answered, if its start names one."""
    match = _ANSWER_ID.match(item.head)
    if match is None:
        return None
    raw = match.group(1).decode("utf-8", "replace")
    request_id: int | str = raw.strip('"') if raw.startswith('"') else int(raw)
    message = (
        f"the server's answer was {item.size} bytes, over the limit of {limit} bytes "
        "(max_message_bytes); it was not read"
    )
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(code=types.INTERNAL_ERROR, message=message),
    )


@contextlib.asynccontextmanager
async def stdio_transport(
    settings: McpServerSettings, errlog: TextIO = sys.stderr
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[Incoming], MemoryObjectSendStream[SessionMessage]]
]:
    """Start the server process and yield (messages from it, messages to it)."""
    process = await anyio.open_process(
        [settings.command, *settings.args],
        env=get_default_environment() | settings.process_env(),
        stderr=errlog,
        cwd=settings.cwd,
        start_new_session=True,  # its own process group: stopped with everything it started
    )
    from_server, read_stream = anyio.create_memory_object_stream[Incoming](0)
    write_stream, to_server = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read, process, from_server, settings)
        tg.start_soon(_write, process, to_server, from_server, writer_done)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(_FLUSH_WAIT_S):
                    await writer_done.wait()
                await _stop(process)
                for stream in (read_stream, write_stream, from_server, to_server):
                    await stream.aclose()
            tg.cancel_scope.cancel()


async def _read(
    process: Process, sink: MemoryObjectSendStream[Incoming], settings: McpServerSettings
) -> None:
    stdout: ByteReceiveStream | None = process.stdout
    if stdout is None:
        raise RuntimeError("the MCP server was started without a stdout pipe")
    limit = settings.max_message_bytes
    lines = LineSplitter(limit)
    with contextlib.suppress(
        anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError
    ):
        async with sink:
            while True:
                for item in lines.feed(await stdout.receive(_READ_BYTES)):
                    if isinstance(item, bytes):
                        await sink.send(parse_message(item))
                        continue
                    answer = refusal(item, limit)
                    log.warning(
                        "mcp_server_message_too_large",
                        server=settings.name,
                        bytes=item.size,
                        limit=limit,
                        answered=answer is not None,
                    )
                    if answer is not None:
                        await sink.send(SessionMessage(answer))
    # The session has gone (or the pipe closed): keep the pipe drained so that a server
    # still writing can see its stdin close and exit.
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        while True:
            await stdout.receive(_READ_BYTES)


async def _write(
    process: Process,
    source: MemoryObjectReceiveStream[SessionMessage],
    from_server: MemoryObjectSendStream[Incoming],
    done: anyio.Event,
) -> None:
    stdin = process.stdin
    try:
        if stdin is None:
            raise RuntimeError("the MCP server was started without a stdin pipe")
        async with source:
            async for item in source:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdin.send((data + "\n").encode("utf-8"))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # The server stopped reading: end the session's stream so no request hangs.
        await from_server.aclose()
    finally:
        done.set()


async def _stop(process: Process) -> None:
    """Close stdin, give the server a moment, then stop its whole process group."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    if not await _exited(process, _STOP_WAIT_S):
        await terminate_posix_process_tree(process, _STOP_WAIT_S)
        if not await _exited(process, _STOP_WAIT_S):
            log.warning("mcp_server_not_stopped", pid=process.pid)
    if process.stdout is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdout.aclose()


async def _exited(process: Process, wait_s: float) -> bool:
    # Not process.wait(): it also waits for the pipes, which a child the server left
    # behind may hold open.
    with anyio.move_on_after(wait_s):
        while process.returncode is None:  # noqa: ASYNC110 - a return code has no event
            await anyio.sleep(_POLL_S)
        return True
    return False
