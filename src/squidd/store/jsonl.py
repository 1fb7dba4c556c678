"""The embedded default store: JSON lines on local disk.

Layout under the data dir (names from `safe_name`, so no id can escape or collide):

    sessions/<name>.jsonl        one message per line, append-only
    sessions/<name>.meta.json    {"session_id", "last_consolidated", "offset"}: the cursor
    sessions/<name>.people.json  the people who spoke in the session (a user message's `by`)
    memory/<name>/summary.md     written only by consolidation
    workspace/MEMORY.md          shared memory, written only by `memory_write`
    workspace/people/<person>/MEMORY.md
                                 one person's own memory (memory per person), written only
                                 by `memory_write` in that person's turns

The cursor records, besides the message count already consolidated, the byte offset where
the first unconsolidated message starts. A turn reads from that offset only, so its cost
depends on the unconsolidated window, not on how long the session has lived, and the
windows of recent sessions stay parsed between turns (store/windows.py). Damaged data
degrades, never stops: a torn line is skipped with a warning; a corrupt meta file reads as
cursor 0 (re-consolidation at worst, no data loss).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from squidd.core.models import HistoryHit, HistoryWindow, Message, SessionId
from squidd.errors import StorageError
from squidd.fs import (
    append_lines_locked,
    atomic_write_text,
    read_bytes_or_empty,
    safe_name,
)
from squidd.store.history_index import HistoryIndex, match_snippet
from squidd.store.records import MESSAGE
from squidd.store.windows import WindowCache, iter_messages

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class _Meta:
    cursor: int
    offset: int


def _read_memory_text(path: Path) -> str:
    """A summary or MEMORY.md as text. Bytes that are not UTF-8 (a bad editor, a torn disk)
    become U+FFFD with a warning: one bad byte must not stop every turn that reads the file."""
    raw = read_bytes_or_empty(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        log.warning(
            "memory_file_not_utf8",
            file=str(path),
            offset=exc.start,
            effect="undecodable bytes replaced in what the model sees",
        )
        return raw.decode("utf-8", errors="replace")


class JsonlStore:
    """`MemoryStore` on local files. All blocking I/O runs in worker threads."""

    def __init__(self, data_dir: Path, *, workspace_dir: Path | None = None) -> None:
        self._data_dir = data_dir
        self._sessions = data_dir / "sessions"
        self._memory = data_dir / "memory"
        self._workspace = workspace_dir or data_dir / "workspace"
        self._people: dict[str, set[str]] = {}  # who spoke in each session, as written
        self._windows = WindowCache()  # recent sessions' windows, parsed (store/windows.py)

    @property
    def data_dir(self) -> Path:
        return self._data_dir

    # --- paths ------------------------------------------------------------------------------
    def history_path(self, session_id: str) -> Path:
        return self._sessions / f"{safe_name(session_id)}.jsonl"

    def meta_path(self, session_id: str) -> Path:
        return self._sessions / f"{safe_name(session_id)}.meta.json"

    def summary_path(self, session_id: str) -> Path:
        return self._memory / safe_name(session_id) / "summary.md"

    @property
    def global_memory_path(self) -> Path:
        return self._workspace / "MEMORY.md"

    def memory_path(self, person: str | None) -> Path:
        """The shared MEMORY.md (None), or `person`'s own."""
        if person is None:
            return self.global_memory_path
        return self._workspace / "people" / safe_name(person) / "MEMORY.md"

    def people_path(self, session_id: str) -> Path:
        return self._sessions / f"{safe_name(session_id)}.people.json"

    # --- history ----------------------------------------------------------------------------
    async def append_messages(self, session_id: SessionId, messages: Sequence[Message]) -> None:
        lines = [MESSAGE.dumps(m) for m in messages]
        await anyio.to_thread.run_sync(append_lines_locked, self.history_path(session_id), lines)
        speakers = {m.by for m in messages if m.by}
        if speakers and not speakers <= self._people.get(session_id, set()):
            await anyio.to_thread.run_sync(self._add_people, session_id, speakers)

    def _add_people(self, session_id: str, speakers: set[str]) -> None:
        known = self._read_people(self.people_path(session_id)) | speakers
        self._people[session_id] = known
        payload = {"session_id": session_id, "people": sorted(known)}
        atomic_write_text(self.people_path(session_id), json.dumps(payload, ensure_ascii=False))

    @staticmethod
    def _read_people(path: Path) -> set[str]:
        raw = read_bytes_or_empty(path)
        if not raw:
            return set()
        try:
            people = json.loads(raw)["people"]
        except (ValueError, TypeError, KeyError):
            log.warning("people_file_unreadable", file=path.name)
            return set()
        return {str(p) for p in people} if isinstance(people, list) else set()

    def _read_meta(self, session_id: str) -> _Meta:
        path = self.meta_path(session_id)
        raw = read_bytes_or_empty(path)
        if not raw:
            return _Meta(0, 0)
        try:
            # Bytes, not text: garbage that is not even UTF-8 is corruption like any other.
            data: Any = json.loads(raw)
            cursor = int(data["last_consolidated"])
            offset = int(data.get("offset", -1))
        except (ValueError, TypeError, KeyError, AttributeError):
            cursor = -1
        if cursor < 0:
            log.warning("meta_file_corrupt", file=str(path), effect="cursor reset to 0")
            return _Meta(0, 0)
        return _Meta(cursor, offset)

    def _offset_valid(self, path: Path, offset: int) -> bool:
        """The offset must lie inside the file and at the start of a line."""
        if offset < 0:
            return False
        if offset == 0:
            return True
        try:
            with path.open("rb") as handle:
                handle.seek(offset - 1)
                return handle.read(1) == b"\n"
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc

    def _locate(self, path: Path, meta: _Meta, index: int) -> int:
        """Byte offset where message number `index` starts (the file's end if beyond)."""
        count, start = 0, 0
        if self._offset_valid(path, meta.offset) and meta.cursor <= index:
            count, start = meta.cursor, meta.offset
        for line in iter_messages(path, start):
            if count == index:
                return line.offset
            count += 1
            start = line.end
        return start

    def _load_window_sync(self, session_id: str) -> HistoryWindow:
        path = self.history_path(session_id)
        meta = self._read_meta(session_id)
        start = meta.offset
        if meta.cursor > 0 and not self._offset_valid(path, meta.offset):
            log.warning("cursor_offset_rebuilt", file=str(self.meta_path(session_id)))
            start = self._locate(path, _Meta(0, 0), meta.cursor)
        elif meta.cursor == 0:
            start = 0
        return HistoryWindow(cursor=meta.cursor, messages=self._windows.messages(path, start))

    async def load_window(self, session_id: SessionId) -> HistoryWindow:
        return await anyio.to_thread.run_sync(self._load_window_sync, session_id)

    def read_turn_sync(
        self, session_id: SessionId, person: str | None
    ) -> tuple[HistoryWindow, str, str]:
        """The window, MEMORY.md (shared, or `person`'s own) and the summary, for a reader
        that reads a turn's inputs in one worker-thread call (gateway/turn_reads.py)."""
        window = self._load_window_sync(session_id)
        global_memory = _read_memory_text(self.memory_path(person))
        return window, global_memory, _read_memory_text(self.summary_path(session_id))

    async def load_consolidated_cursor(self, session_id: SessionId) -> int:
        meta = await anyio.to_thread.run_sync(self._read_meta, session_id)
        return meta.cursor

    def _save_cursor_sync(self, session_id: str, cursor: int) -> None:
        if cursor < 0:
            raise ValueError("cursor must be >= 0")
        path = self.history_path(session_id)
        offset = self._locate(path, self._read_meta(session_id), cursor)
        payload = {"session_id": session_id, "last_consolidated": cursor, "offset": offset}
        atomic_write_text(self.meta_path(session_id), json.dumps(payload))

    async def save_consolidated_cursor(self, session_id: SessionId, cursor: int) -> None:
        await anyio.to_thread.run_sync(self._save_cursor_sync, session_id, cursor)

    # --- memory documents -------------------------------------------------------------------
    async def load_global_memory(self, person: str | None = None) -> str:
        return await anyio.to_thread.run_sync(_read_memory_text, self.memory_path(person))

    async def save_global_memory(self, content: str, person: str | None = None) -> None:
        await anyio.to_thread.run_sync(atomic_write_text, self.memory_path(person), content)

    async def load_session_summary(self, session_id: SessionId) -> str:
        return await anyio.to_thread.run_sync(_read_memory_text, self.summary_path(session_id))

    async def save_session_summary(self, session_id: SessionId, content: str) -> None:
        path = self.summary_path(session_id)
        await anyio.to_thread.run_sync(atomic_write_text, path, content)

    # --- search ---------------------------------------------------------------------------
    @property
    def history_index(self) -> HistoryIndex:
        return HistoryIndex(self._data_dir / "index" / "history.sqlite")

    def _search_sync(self, session_id: str, query: str, limit: int) -> list[HistoryHit]:
        terms = [t for t in query.lower().split() if t]
        if not terms:
            return []
        hits: list[HistoryHit] = []
        summary = _read_memory_text(self.summary_path(session_id))
        for para_index, paragraph in enumerate(p for p in summary.split("\n\n") if p.strip()):
            snippet = match_snippet(paragraph, terms)
            if snippet is not None:
                hits.append(HistoryHit("summary", para_index, "summary", None, snippet))
        path = self.history_path(session_id)
        try:
            history = self.history_index.search({path: session_id}, query, limit, one_session=True)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot search {path}: {exc}") from exc
        return (history + hits)[:limit]

    async def search_history(
        self, session_id: SessionId, query: str, *, limit: int
    ) -> list[HistoryHit]:
        return await anyio.to_thread.run_sync(self._search_sync, session_id, query, limit)

    def session_files(self) -> dict[Path, str]:
        """Every session's history file and its session id (the file name when unknown)."""
        files: dict[Path, str] = {}
        for path in sorted(self._sessions.glob("*.jsonl")):
            name = path.stem
            # The cursor's file names the session, else the people's (both may be missing).
            for suffix in (".meta.json", ".people.json"):
                raw = read_bytes_or_empty(path.with_suffix(suffix))
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    name = str(json.loads(raw)["session_id"]) if raw else name
                if name != path.stem:
                    break
            files[path] = name
        return files

    def sessions_of(self, person: str) -> dict[Path, str]:
        """The session files `person` spoke in (as recorded since memory per person)."""
        return {
            path: name
            for path, name in self.session_files().items()
            if person in self._read_people(path.with_suffix(".people.json"))
        }

    def sessions_version(self) -> int:
        """Changes whenever a session file appears, goes or is replaced (a people or cursor
        file rewritten): the sessions folder's modification time."""
        try:
            return self._sessions.stat().st_mtime_ns
        except FileNotFoundError:
            return 0

    def _search_all_sync(self, query: str, limit: int, person: str | None) -> list[HistoryHit]:
        files = self.session_files() if person is None else self.sessions_of(person)
        return self.search_files(files, query, limit)

    def search_files(self, files: dict[Path, str], query: str, limit: int) -> list[HistoryHit]:
        """The newest keyword matches in `files` (path → session id); blocking."""
        try:
            return self.history_index.search(files, query, limit, one_session=False)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot search the histories: {exc}") from exc

    async def search_all_sessions(
        self, query: str, *, limit: int, person: str | None = None
    ) -> list[HistoryHit]:
        """The newest matches across every session, each naming its session and date;
        with `person`, across the sessions that person spoke in only."""
        return await anyio.to_thread.run_sync(self._search_all_sync, query, limit, person)
