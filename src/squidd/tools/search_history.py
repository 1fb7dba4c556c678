"""`search_history` and `search_all_history`: find earlier messages by words, from the index.

`search_history` searches this session (and its summary); `search_all_history` searches every
session and names the session and date of each hit. It is off unless configured
(`tools.search_history_across_sessions`), and the policy decides which channels get it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from squidd.core.models import HistoryHit, SessionId, ToolResult
from squidd.core.ports import MemoryStore
from squidd.errors import StorageError, ToolError


class SearchHistoryTool:
    name = "search_history"
    description = (
        "Search this conversation's full history, including parts already condensed into the "
        "summary, for messages containing all the given words. Returns short snippets, "
        "newest first."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words that must all appear."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(self, storage: MemoryStore, session_id: SessionId, *, limit: int = 10) -> None:
        self._storage = storage
        self._session_id = session_id
        self._limit = limit

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        query, limit = _query_and_limit(self.name, arguments, self._limit)
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


def _query_and_limit(tool: str, arguments: Mapping[str, Any], most: int) -> tuple[str, int]:
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError(f"{tool} needs a non-empty 'query' string")
    if len(query) > 500:
        raise ToolError("the query is too long (500 characters at most)")
    limit = arguments.get("limit", most)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ToolError("'limit' must be a positive integer")
    return query, min(limit, most, 50)


class SearchAllHistoryTool:
    name = "search_all_history"
    description = (
        "Search every conversation's history (all chats, mails, scheduled runs) for messages "
        "containing all the given words. Returns snippets with the conversation and the date, "
        "newest first."
    )
    parameters: Mapping[str, Any] = SearchHistoryTool.parameters

    def __init__(
        self, search: Callable[[str, int], Awaitable[list[HistoryHit]]], *, limit: int = 10
    ) -> None:
        self._search = search
        self._limit = limit

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        query, limit = _query_and_limit(self.name, arguments, self._limit)
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
