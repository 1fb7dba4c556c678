"""One MCP server kept connected: a child the daemon's supervisor restarts with the backoff.

`McpServer.run` opens the transport (a stdio process through `stdio.stdio_transport`, or a
streamable-HTTP endpoint through the SDK's), runs
the MCP handshake, lists the server's tools and publishes them, then watches the connection:
the transport reaching end of stream (the process exited), a failed ping, or a call that
found the connection closed ends `run` with `McpServerDownError` (transient), and the
supervisor reconnects after the shared backoff. While the server is not up its tool list is
empty, so turns simply do not see its tools: a turn never gets to call a dead connection
except in the moment between the drop and its detection, and that call ends in a tool error.

Everything the server says that reaches the model, the logs or `squidd status` (tool
descriptions and schemas, error messages, results) is made valid text (`squidd.text`) first.
Lines the server prints on stdout that are not JSON-RPC are logged (the first few of each
connection, then a count) and dropped; they do not end the connection.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterable, AsyncIterator
from enum import StrEnum
from typing import Any, TextIO

import anyio
import mcp_types as types
import structlog
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from squidd.config.mcp import McpServerSettings
from squidd.core.supervisor import ChildHealth
from squidd.errors import TransientError
from squidd.text import clean_data, clean_text
from squidd.tools.mcp.schema import SchemaRejectedError, sanitize_schema
from squidd.tools.mcp.stdio import stdio_transport
from squidd.tools.mcp.tool import McpTool, effect_from_annotations

log = structlog.get_logger()

__all__ = ["McpServer", "McpServerDownError", "ServerState"]

_BAD_LINES_LOGGED = 3
_MAX_TOOLS = 256


class McpServerDownError(TransientError):
    """The server's connection could not be made or was lost; the supervisor retries."""


class ServerState(StrEnum):
    CONNECTING = "connecting"
    UP = "up"
    DOWN = "down"


def _reason(exc: BaseException) -> str:
    """A one-line reason from an error, looking inside task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    # The text may come from the server (an error it sent): valid text only.
    message = clean_text(str(exc)).strip()
    text = message.splitlines()[0] if message else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


class McpServer:
    """One configured server: its connection loop, its current tools and its state."""

    def __init__(
        self,
        settings: McpServerSettings,
        *,
        connect_timeout_s: float,
        ping_interval_s: float,
        errlog: TextIO = sys.stderr,
    ) -> None:
        self._settings = settings
        self.name = settings.name
        self._connect_timeout_s = connect_timeout_s
        self._ping_interval_s = ping_interval_s
        self._errlog = errlog
        self._session: ClientSession | None = None
        self._tools: tuple[McpTool, ...] = ()
        self._lost = anyio.Event()
        self._bad_lines = 0
        self.state = ServerState.CONNECTING
        self.last_error = ""
        self.connected = anyio.Event()  # set at the first successful connection
        self.settled = anyio.Event()  # set when the first attempt ended, either way

    # --- what turns and `squidd status` see -----------------------------------------------

    @property
    def settings(self) -> McpServerSettings:
        """The server's own config entry (limits its tools apply per call)."""
        return self._settings

    def tools(self) -> tuple[McpTool, ...]:
        return self._tools if self.state is ServerState.UP else ()

    def snapshot(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self._settings.transport,
            "state": str(self.state),
            "tools": len(self.tools()),
            "last_error": self.last_error,
        }

    def session(self) -> ClientSession | None:
        return self._session if self.state is ServerState.UP else None

    def connection_lost(self, reason: str) -> None:
        """A call found the connection closed: take the tools away and reconnect."""
        if self.state is ServerState.UP:
            log.warning("mcp_server_lost", server=self.name, reason=reason)
            self.state = ServerState.DOWN
            self.last_error = reason
        self._lost.set()

    # --- the supervised child --------------------------------------------------------------

    async def run(self, health: ChildHealth, *, task_status: TaskStatus[None]) -> None:
        """Connect, publish the tools, and return only by raising when the connection ends."""
        self.state = ServerState.CONNECTING
        self._lost = anyio.Event()
        self._bad_lines = 0
        try:
            async with self._connect() as session:
                with anyio.fail_after(self._connect_timeout_s):
                    await session.initialize()
                    tools = await self._list_tools(session)
                self._session, self._tools = session, tools
                self.state = ServerState.UP
                self.last_error = ""
                self.connected.set()
                self.settled.set()
                log.info("mcp_server_up", server=self.name, tools=len(tools))
                task_status.started()
                await self._watch(session)
        except McpServerDownError as exc:
            self._down(str(exc))
            raise
        except Exception as exc:  # noqa: BLE001 - translated at the edge: every way a connection fails
            reason = _reason(exc)
            if isinstance(exc, TimeoutError):
                reason = f"no answer within {self._connect_timeout_s:g}s"
            self._down(reason)
            raise McpServerDownError(reason) from None
        finally:
            self.settled.set()
            self._session, self._tools = None, ()
            if self.state is ServerState.UP:
                self.state = ServerState.DOWN

    def _down(self, reason: str) -> None:
        self.state = ServerState.DOWN
        self.last_error = reason

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[ClientSession]:
        settings = self._settings
        async with contextlib.AsyncExitStack() as stack:
            if settings.transport == "http":
                client = await stack.enter_async_context(
                    create_mcp_http_client(headers=settings.request_headers() or None)
                )
                read, write = await stack.enter_async_context(
                    streamable_http_client(settings.url, http_client=client)
                )
            else:
                read, write = await stack.enter_async_context(
                    stdio_transport(settings, self._errlog)
                )
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            tg = await stack.enter_async_context(anyio.create_task_group())
            tg.start_soon(self._pump, read, send)
            session = await stack.enter_async_context(ClientSession(receive, write))
            try:
                yield session
            finally:
                tg.cancel_scope.cancel()

    async def _pump(
        self,
        source: AsyncIterable[SessionMessage | Exception],
        sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Forward the transport's messages to the session; note the end of the stream."""
        async with sink:
            try:
                async for item in source:
                    if isinstance(item, Exception):
                        self._bad_output(item)
                        continue
                    await sink.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
        self.connection_lost("the server closed the connection")

    def _bad_output(self, exc: Exception) -> None:
        self._bad_lines += 1
        if self._bad_lines <= _BAD_LINES_LOGGED:
            log.warning(
                "mcp_server_bad_output",
                server=self.name,
                reason=_reason(exc)[:200],
                note="not a JSON-RPC message; ignored",
            )
        elif self._bad_lines == _BAD_LINES_LOGGED + 1:
            log.warning("mcp_server_bad_output_muted", server=self.name)

    async def _list_tools(self, session: ClientSession) -> tuple[McpTool, ...]:
        found: list[types.Tool] = []
        cursor: str | None = None
        while len(found) < _MAX_TOOLS:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            found.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        tools: list[McpTool] = []
        for tool in found[:_MAX_TOOLS]:
            if not self._settings.offers(tool.name):
                continue
            try:
                # What the server wrote reaches the model: valid text only.
                schema = clean_data(sanitize_schema(tool.input_schema))
            except SchemaRejectedError as exc:
                log.warning(
                    "mcp_tool_dropped",
                    server=self.name,
                    tool=clean_text(tool.name),
                    reason=clean_text(str(exc)),
                )
                continue
            description = clean_text(tool.description or tool.title or "")
            adapter = McpTool.build(
                self,
                tool.name,
                description,
                schema,
                effect=effect_from_annotations(tool.annotations),
            )
            if adapter is None:
                log.warning(
                    "mcp_tool_dropped",
                    server=self.name,
                    tool=clean_text(tool.name),
                    reason="the name cannot be offered to the model ([A-Za-z0-9_-], 64 max)",
                )
                continue
            tools.append(adapter)
        return tuple(tools)

    async def _watch(self, session: ClientSession) -> None:
        async with anyio.create_task_group() as tg:

            async def pinger() -> None:
                while True:
                    await anyio.sleep(self._ping_interval_s)
                    try:
                        with anyio.fail_after(self._settings.timeout_s):
                            await session.send_ping()
                    except Exception as exc:  # noqa: BLE001 - any failed ping is a lost connection
                        self.connection_lost(f"ping failed: {_reason(exc)}")
                        return

            tg.start_soon(pinger)
            await self._lost.wait()
            tg.cancel_scope.cancel()
        raise McpServerDownError(self.last_error or "the connection was lost")
