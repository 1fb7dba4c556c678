"""`search_history` and `search_all_history`: find earlier messages by words, from the index.

`search_history` searches this session (and its summary); `search_all_history` searches every
session and names the session and date of each hit. It is off unless configured
(`tools.search_history_across_sessions`), and the policy decides which channels get it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from squidd.core.journal import Effect
from squidd.core.models import HistoryHit, SessionId, ToolResult
from squidd.core.ports import MemoryStore
from squidd.errors import StorageError, ToolError
from squidd.tools.arguments import Arguments, parse
from squidd.tools.declared import Declared


class SearchArguments(Arguments):
    query: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)
    ] = Field(description="Words that must all appear.")
    limit: Annotated[int, Field(ge=1, le=50)] | None = None


class SearchHistoryTool(Declared[SearchArguments], name="search_history", effect=Effect.READ_ONLY):
    description = (
        "Search this conversation's full history, including parts already condensed into the "
        "summary, for messages containing all the given words. Returns short snippets, "
        "newest first."
    )

    def __init__(self, storage: MemoryStore, session_id: SessionId, *, limit: int = 10) -> None:
        self._storage = storage
        self._session_id = session_id
        self._limit = limit

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        query, limit = _query_and_limit(arguments, self._limit)
        try:
            hits = await self._storage.search_history(self._session_id, query, limit=limit)
        except StorageError as exc:
            raise ToolError(f"history could not be searched: {exc}") from exc
        if not hits:
            return ToolResult(f"No messages found containing: {query}")
        lines = []
        for hit in hits:
            where = f"summary §{hit.index + 1}" if hit.source == "summary" else f"#{hit.index}"
            when = f" {hit.ts}" if hit.ts else ""
            lines.append(f"[{where}{when}] {hit.role}: {hit.snippet}")
        return ToolResult("\n".join(lines))


def _query_and_limit(arguments: Mapping[str, Any], most: int) -> tuple[str, int]:
    args = parse(SearchArguments, arguments)
    return args.query, min(args.limit or most, most)


class SearchAllHistoryTool(
    Declared[SearchArguments], name="search_all_history", effect=Effect.READ_ONLY
):
    description = (
        "Search every conversation's history (all chats, mails, scheduled runs) for messages "
        "containing all the given words. Returns snippets with the conversation and the date, "
        "newest first."
    )

    def __init__(
        self, search: Callable[[str, int], Awaitable[list[HistoryHit]]], *, limit: int = 10
    ) -> None:
        self._search = search
        self._limit = limit

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        query, limit = _query_and_limit(arguments, self._limit)
        try:
            hits = await self._search(query, limit)
        except StorageError as exc:
            raise ToolError(f"history could not be searched: {exc}") from exc
        if not hits:
            return ToolResult(f"No messages found containing: {query}")
        return ToolResult(
            "\n".join(
                f"[{hit.session} #{hit.index} {hit.ts or 'undated'}] {hit.role}: {hit.snippet}"
                for hit in hits
            )
        )
