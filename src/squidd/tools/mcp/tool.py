"""An MCP server's tool as a `core.ports.Tool`, named `<server>__<tool>`.

The call goes through the server's current session with the server's `timeout_s`; a turn
that is cancelled cancels the call (the SDK tells the server). A call that finds the
connection gone reports it to its server, which takes its tools away and reconnects, and
the model gets a short tool error instead of a hung turn.

Its `effect` (what a second run does, for a turn resumed after a crash, core/journal.py)
comes from the server's annotations: `readOnlyHint` read-only, else `idempotentHint`
idempotent, else (nothing said) a side effect. `tools.effects` may override it by name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

import anyio
import structlog
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations

from squidd.config.mcp import McpServerSettings
from squidd.core.journal import Effect
from squidd.core.models import ToolResult
from squidd.text import clean_text
from squidd.tools.mcp.result import render_result

log = structlog.get_logger()

__all__ = ["SEPARATOR", "McpTool", "ToolServer", "effect_from_annotations"]

SEPARATOR = "__"
_TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONNECTION_CLOSED = -32000


def effect_from_annotations(annotations: ToolAnnotations | None) -> Effect:
    """The effect class an MCP tool declares (`readOnlyHint`, `idempotentHint` on the
    wire); only an explicit `true` counts."""
    if annotations is None:
        return Effect.SIDE_EFFECT
    if annotations.read_only_hint is True:
        return Effect.READ_ONLY
    if annotations.idempotent_hint is True:
        return Effect.IDEMPOTENT
    return Effect.SIDE_EFFECT


class ToolServer(Protocol):
    """What a tool asks of its server (connection.py's `McpServer`): its name and settings,
    the live session, and a way to report the connection gone."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> McpServerSettings: ...

    def session(self) -> ClientSession | None: ...

    def connection_lost(self, reason: str) -> None: ...


class McpTool:
    """Implements `squidd.core.ports.Tool` for one tool of one MCP server."""

    def __init__(
        self,
        server: ToolServer,
        remote_name: str,
        description: str,
        schema: dict[str, Any],
        *,
        effect: Effect = Effect.SIDE_EFFECT,
    ) -> None:
        self._server = server
        self.effect = effect
        self.remote_name = remote_name
        self._name = f"{server.name}{SEPARATOR}{remote_name}"
        self._description = description
        self._schema = schema

    @classmethod
    def build(
        cls,
        server: ToolServer,
        remote_name: str,
        description: str,
        schema: dict[str, Any],
        *,
        effect: Effect = Effect.SIDE_EFFECT,
    ) -> McpTool | None:
        """The adapter, or None when the namespaced name is not a valid model tool name."""
        if not _TOOL_NAME_RE.fullmatch(f"{server.name}{SEPARATOR}{remote_name}"):
            return None
        return cls(server, remote_name, description, schema, effect=effect)

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return f"[{self._server.name}] {self._description}".strip()

    @property
    def parameters(self) -> Mapping[str, Any]:
        return self._schema

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        settings = self._server.settings
        session = self._server.session()
        if session is None:
            return ToolResult(
                f"the MCP server {self._server.name!r} is not connected right now; "
                "its tools come back when it does",
                is_error=True,
            )
        try:
            with anyio.fail_after(settings.timeout_s):
                result = await session.call_tool(self.remote_name, dict(arguments))
        except TimeoutError:
            log.warning("mcp_call_timeout", tool=self._name, timeout_s=settings.timeout_s)
            return ToolResult(
                f"{self._name} did not answer within {settings.timeout_s:g}s", is_error=True
            )
        except MCPError as exc:
            message = clean_text(str(exc.error.message))  # the server's words: valid text only
            if exc.error.code == _CONNECTION_CLOSED:
                self._server.connection_lost(f"call failed: {message}")
            log.warning("mcp_call_failed", tool=self._name, code=exc.error.code)
            return ToolResult(f"{self._name} failed: {message}", is_error=True)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            self._server.connection_lost("the connection closed during a call")
            return ToolResult(f"{self._name}: the server went away during the call", is_error=True)
        return render_result(
            result.content,
            result.structured_content,
            is_error=bool(result.is_error),
            max_chars=settings.max_result_chars,
        )
