"""`recall`: find what was said or remembered before, by meaning as well as by words.

The search (gateway/recall.py) fuses the keyword index with the vector index, within the
speaker's scope (their own conversations and memory, or everything when memory is shared),
and answers snippets with their date and conversation, cut to a token budget. Built per turn
with the speaker bound in, like memory_write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from squidd.core.journal import Effect
from squidd.core.models import ToolResult
from squidd.errors import StorageError, ToolError
from squidd.tools.arguments import Arguments
from squidd.tools.declared import Declared

__all__ = ["RecallTool"]


class RecallArguments(Arguments):
    query: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)
    ] = Field(description="What to remember: a question or a few words; any phrasing.")


class RecallTool(Declared[RecallArguments], name="recall", effect=Effect.READ_ONLY):
    description = (
        "Recall earlier conversations, summaries and saved memory related to a question, "
        "by meaning as well as by exact words. Returns the most relevant snippets, each "
        "with its date and conversation."
    )

    def __init__(self, search: Callable[[str], Awaitable[list[str]]]) -> None:
        self._search = search

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        query = self.parse(arguments).query
        try:
            lines = await self._search(query)
        except StorageError as exc:
            raise ToolError(f"memory could not be searched: {exc}") from exc
        if not lines:
            return ToolResult(f"Nothing recalled for: {query}")
        return ToolResult("\n".join(lines))
