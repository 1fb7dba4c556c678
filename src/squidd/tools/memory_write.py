"""`memory_write`: the agent's only way to change a MEMORY.md.

Full overwrite: the agent curates the document. Instantiated per call (through
`AgentLoop.run(..., extra_tools=[...])`) with the session it serves and whose memory it
writes: the shared MEMORY.md, or (memory per person) the speaker's own, which only that
person's turns read.
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


PERSONAL_DESCRIPTION = (
    "Update your long-term memory of the person you are talking with. Only your "
    "conversations with this person see it (other people have their own): keep their "
    "preferences, ongoing projects and key facts here. The content REPLACES the current "
    "memory document entirely, so include everything worth keeping. Keep it concise (about "
    "300 words)."
)


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
        self,
        storage: MemoryStore,
        session_id: SessionId,
        *,
        max_chars: int = DEFAULT_MAX_CHARS,
        person: str | None = None,
    ) -> None:
        self._storage = storage
        self._session_id = session_id
        self._max_chars = max_chars
        self._person = person
        if person is not None:
            self.description = PERSONAL_DESCRIPTION

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        content = self.parse(arguments).content
        if len(content) > self._max_chars:
            raise ToolError(
                f"memory is limited to {self._max_chars} characters and this content has "
                f"{len(content)}; condense it and call memory_write again"
            )
        try:
            await self._storage.save_global_memory(content, self._person)
        except StorageError as exc:
            raise ToolError(f"memory could not be saved: {exc}") from exc
        return ToolResult(f"Memory updated ({len(content)} characters).")
