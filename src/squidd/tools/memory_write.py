"""`memory_write`: the agent's only way to change the global MEMORY.md.

Full overwrite: the agent curates the document. Instantiated per call (through
`AgentLoop.run(..., extra_tools=[...])`) with the session it serves, although global memory
itself is shared by every session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from squidd.core.journal import Effect
from squidd.core.models import SessionId, ToolResult
from squidd.core.ports import MemoryStore
from squidd.errors import StorageError, ToolError
from squidd.tools.arguments import Arguments
from squidd.tools.declared import Declared

DEFAULT_MAX_CHARS = 20_000


class MemoryWriteArguments(Arguments):
    content: str = Field(description="The complete new memory document (Markdown).")


class MemoryWriteTool(
    Declared[MemoryWriteArguments], name="memory_write", effect=Effect.IDEMPOTENT
):
    description = (
        "Update your long-term memory. This is a global document shared across all sessions "
        "and channels: use it to keep user preferences, ongoing projects and key facts. The "
        "content REPLACES the current memory document entirely, so include everything worth "
        "keeping. Keep it concise (about 300 words)."
    )

    def __init__(
        self, storage: MemoryStore, session_id: SessionId, *, max_chars: int = DEFAULT_MAX_CHARS
    ) -> None:
        self._storage = storage
        self._session_id = session_id
        self._max_chars = max_chars

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        content = self.parse(arguments).content
        if len(content) > self._max_chars:
            raise ToolError(
                f"memory is limited to {self._max_chars} characters and this content has "
                f"{len(content)}; condense it and call memory_write again"
            )
        try:
            await self._storage.save_global_memory(content)
        except StorageError as exc:
            raise ToolError(f"memory could not be saved: {exc}") from exc
        return ToolResult(f"Memory updated ({len(content)} characters).")
