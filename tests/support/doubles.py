"""In-memory doubles of the storage ports, one place for every test that wants one.

Each double is held to the same contract suite as its file implementation
(`tests/contracts/`), so a unit test that runs on a double sees what production sees:

* `MemoryHandledLog` -- `core.ports.HandledLog` (file: `store.handled.HandledFile`)
* `MemoryOutbox` -- `core.ports.Outbox` (file: `store.outbox.OutboxDir`)
* `InMemoryStore` -- `core.ports.MemoryStore` (file: `store.jsonl.JsonlStore`)
* `MemoryJobStore` -- `core.ports.JobStore` (file: `store.cron_jobs.JobsFile`)
* `MemoryAttempts` -- `core.poison.AttemptLog` (file: `store.attempts.AttemptsDir`)
* `MemoryDeadLetters` -- `core.poison.DeadLetters` (file: `store.parked.ParkedDir`)

The state is public (`handled`, `entries`, ...) so a test can arrange or inspect it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from squidd.core.cron import CronJob
from squidd.core.models import HistoryHit, HistoryWindow, Message, PendingReply, SessionId
from squidd.core.poison import Parked, ParkState, PoisonGuard


class MemoryHandledLog:
    def __init__(self) -> None:
        self.handled: set[tuple[str, str]] = set()
        self.failed_ids: set[tuple[str, str]] = set()

    async def contains(self, channel: str, source_id: str) -> bool:
        return (channel, source_id) in self.handled

    async def failed(self, channel: str, source_id: str) -> bool:
        return (channel, source_id) in self.failed_ids

    async def add(self, channel: str, source_id: str, *, failed: bool = False) -> None:
        self.handled.add((channel, source_id))
        if failed:
            self.failed_ids.add((channel, source_id))


class MemoryAttempts:
    def __init__(self) -> None:
        self.counts: dict[str, tuple[int, str]] = {}

    async def get(self, key: str) -> tuple[int, str]:
        return self.counts.get(key, (0, ""))

    async def set(self, key: str, count: int, reason: str) -> None:
        self.counts[key] = (count, reason)

    async def clear(self, key: str) -> None:
        self.counts.pop(key, None)


class MemoryDeadLetters:
    def __init__(self) -> None:
        self.items: dict[str, Parked] = {}

    async def park(self, item: Parked) -> None:
        earlier = self.items.get(item.id)
        if earlier is not None:
            item = item.with_state(
                ParkState.PARKED,
                retries=earlier.retries,
                inbound=item.inbound or earlier.inbound,
                reply=item.reply or earlier.reply,
            )
        self.items[item.id] = item


def memory_poison(max_attempts: int = 3) -> PoisonGuard:
    """A poison guard over the in-memory attempt counts and dead letters."""
    return PoisonGuard(MemoryAttempts(), MemoryDeadLetters(), max_attempts=max_attempts)


class MemoryOutbox:
    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], PendingReply] = {}

    async def get(self, channel: str, source_id: str) -> PendingReply | None:
        return self.entries.get((channel, source_id))

    async def put(self, channel: str, source_id: str, reply: PendingReply) -> None:
        self.entries[(channel, source_id)] = reply

    async def remove(self, channel: str, source_id: str) -> None:
        self.entries.pop((channel, source_id), None)

    async def count(self) -> int:
        return len(self.entries)


class InMemoryStore:
    """The memory port on dicts; the search keeps the JSONL store's order and limit, with a
    plain snippet (the text around the first match)."""

    def __init__(self) -> None:
        self.history: dict[str, list[Message]] = {}
        self.cursors: dict[str, int] = {}
        self.summaries: dict[str, str] = {}
        self.global_memory = ""
        self.people_memory: dict[str, str] = {}

    async def append_messages(self, session_id: SessionId, messages: Sequence[Message]) -> None:
        self.history.setdefault(session_id, []).extend(messages)

    async def load_window(self, session_id: SessionId) -> HistoryWindow:
        cursor = self.cursors.get(session_id, 0)
        return HistoryWindow(cursor, list(self.history.get(session_id, [])[cursor:]))

    async def load_consolidated_cursor(self, session_id: SessionId) -> int:
        return self.cursors.get(session_id, 0)

    async def save_consolidated_cursor(self, session_id: SessionId, cursor: int) -> None:
        if cursor < 0:
            raise ValueError("cursor must be >= 0")
        self.cursors[session_id] = cursor

    async def load_global_memory(self, person: str | None = None) -> str:
        return self.global_memory if person is None else self.people_memory.get(person, "")

    async def save_global_memory(self, content: str, person: str | None = None) -> None:
        if person is None:
            self.global_memory = content
        else:
            self.people_memory[person] = content

    async def load_session_summary(self, session_id: SessionId) -> str:
        return self.summaries.get(session_id, "")

    async def save_session_summary(self, session_id: SessionId, content: str) -> None:
        self.summaries[session_id] = content

    async def search_history(
        self, session_id: SessionId, query: str, *, limit: int
    ) -> list[HistoryHit]:
        terms = query.lower().split()
        if not terms:
            return []
        history = [
            HistoryHit("history", index, m.role, m.ts, _snippet(m.content, terms))
            for index, m in enumerate(self.history.get(session_id, []))
            if m.role in ("user", "assistant") and m.content and _found(m.content, terms)
        ]
        paragraphs = [p for p in self.summaries.get(session_id, "").split("\n\n") if p.strip()]
        summary = [
            HistoryHit("summary", index, "summary", None, _snippet(p, terms))
            for index, p in enumerate(paragraphs)
            if _found(p, terms)
        ]
        return [*reversed(history[-limit:]), *summary][:limit] if limit > 0 else []


def _found(text: str, terms: list[str]) -> bool:
    return all(term in text.lower() for term in terms)


def _snippet(text: str | None, terms: list[str]) -> str:
    text = text or ""
    first = min(text.lower().find(term) for term in terms)
    return " ".join(text[max(0, first - 80) : first + 80].split())


class MemoryJobStore:
    def __init__(self, jobs: Sequence[CronJob] = ()) -> None:
        self.jobs: list[CronJob] = list(jobs)
        self.changes = 0

    async def load(self) -> list[CronJob]:
        return list(self.jobs)

    async def modify(self, change: Callable[[list[CronJob]], list[CronJob]]) -> list[CronJob]:
        self.jobs = list(change(list(self.jobs)))
        self.changes += 1
        return list(self.jobs)

    async def version(self) -> object:
        return self.changes
