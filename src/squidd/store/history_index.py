"""The full-text index of the session histories: SQLite FTS5 beside the JSONL files.

The JSONL files stay the source of truth; `<data dir>/index/history.sqlite` is a cache that
can be deleted at any time. Each indexed session remembers its file's inode and the byte
offset indexed so far. Before a search the index catches up: lines past that offset are
added (a history is append-only), and a file that was replaced or shrank (other inode,
smaller size, offset not at a line start) is indexed again from the start. A missing or
damaged index file is rebuilt from the JSONL.

The FTS5 table uses the trigram tokenizer, so a query word matches inside words and case
does not matter, as the old scan did; every candidate is checked again in Python with the
scan's exact rule (all words appear), so words shorter than three characters still work.
All calls are blocking; the store runs them in a worker thread.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from squidd.core.models import HistoryHit
from squidd.fs import make_private_dir, open_private

log = structlog.get_logger()

_SNIPPET_RADIUS = 80
_TRIGRAM = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, session TEXT NOT NULL, inode INTEGER NOT NULL,
    offset INTEGER NOT NULL, count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rows (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL, idx INTEGER NOT NULL, role TEXT NOT NULL,
    ts TEXT, content TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS rows_by_path ON rows (path, id);
CREATE INDEX IF NOT EXISTS rows_by_time ON rows (ts);
CREATE VIRTUAL TABLE IF NOT EXISTS messages USING fts5(
    content, content = 'rows', content_rowid = 'id', tokenize = 'trigram'
);
"""


@dataclass(frozen=True, slots=True)
class _FileState:
    inode: int
    offset: int
    count: int


def match_snippet(text: str, terms: list[str]) -> str | None:
    """A short snippet around the first term when every term occurs in `text`, else None."""
    lowered = text.lower()
    positions = [lowered.find(term) for term in terms]
    if any(pos < 0 for pos in positions):
        return None
    first = min(positions)
    start = max(0, first - _SNIPPET_RADIUS)
    end = min(len(text), first + _SNIPPET_RADIUS)
    snippet = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + snippet + ("…" if end < len(text) else "")


def _fts_query(terms: list[str]) -> str | None:
    """An FTS5 query over the terms the trigram index can use (None: it can use none)."""
    usable = [t for t in terms if len(t) >= _TRIGRAM]
    if not usable:
        return None
    return " AND ".join('"' + t.replace('"', '""') + '"' for t in usable)


class HistoryIndex:
    """The index file of one data dir. Cheap to construct; each call opens its connection."""

    def __init__(self, path: Path) -> None:
        self._path = path

    @property
    def path(self) -> Path:
        return self._path

    def _connect(self) -> sqlite3.Connection:
        make_private_dir(self._path.parent)
        os.close(open_private(self._path, os.O_RDWR))  # 0600 before SQLite makes it
        conn = sqlite3.connect(self._path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        return conn

    def _open(self) -> sqlite3.Connection:
        """A connection to a usable index; a damaged file is removed and started afresh."""
        try:
            conn = self._connect()
            conn.execute("SELECT count(*) FROM files").fetchone()
        except sqlite3.DatabaseError as exc:
            log.warning("history_index_rebuilt", file=str(self._path), reason=str(exc))
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self._path}{suffix}").unlink(missing_ok=True)
            return self._connect()
        return conn

    # --- catching up with the JSONL -------------------------------------------------------
    def _state(self, conn: sqlite3.Connection, path: Path) -> _FileState | None:
        row = conn.execute(
            "SELECT inode, offset, count FROM files WHERE path = ?", (str(path),)
        ).fetchone()
        return None if row is None else _FileState(int(row[0]), int(row[1]), int(row[2]))

    @staticmethod
    def _resumable(path: Path, state: _FileState, inode: int, size: int) -> bool:
        if state.inode != inode or state.offset > size:
            return False
        if state.offset == 0:
            return True
        with path.open("rb") as handle:
            handle.seek(state.offset - 1)
            return handle.read(1) == b"\n"

    def refresh(self, conn: sqlite3.Connection, files: dict[Path, str]) -> None:
        """Bring the rows of the JSONL files (path -> session id) up to date, in one
        transaction (see the module docstring)."""
        stale: list[tuple[Path, str, os.stat_result | None]] = []
        for path, session in files.items():
            try:
                stat: os.stat_result | None = path.stat()
            except FileNotFoundError:
                stat = None
            state = self._state(conn, path)
            if stat is None and state is None:
                continue
            if (
                stat is not None
                and state is not None
                and (state.inode, state.offset) == (stat.st_ino, stat.st_size)
            ):
                continue
            stale.append((path, session, stat))
        if not stale:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            for path, session, stat in stale:
                self._catch_up(conn, path, session, stat)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _catch_up(
        self, conn: sqlite3.Connection, path: Path, session: str, stat: os.stat_result | None
    ) -> None:
        state = self._state(conn, path)  # another process may have caught up meanwhile
        if stat is None:
            if state is not None:
                self._forget(conn, path)
            return
        if state is None or not self._resumable(path, state, stat.st_ino, stat.st_size):
            if state is not None:
                log.info("history_index_session_reindexed", file=str(path))
                self._forget(conn, path)
            state = _FileState(stat.st_ino, 0, 0)
        offset, count = self._append(conn, path, state)
        conn.execute(
            "INSERT OR REPLACE INTO files (path, session, inode, offset, count) "
            "VALUES (?, ?, ?, ?, ?)",
            (str(path), session, stat.st_ino, offset, count),
        )

    @staticmethod
    def _forget(conn: sqlite3.Connection, path: Path) -> None:
        conn.execute(
            "INSERT INTO messages (messages, rowid, content) "
            "SELECT 'delete', id, content FROM rows WHERE path = ?",
            (str(path),),
        )
        conn.execute("DELETE FROM rows WHERE path = ?", (str(path),))
        conn.execute("DELETE FROM files WHERE path = ?", (str(path),))

    def _append(self, conn: sqlite3.Connection, path: Path, state: _FileState) -> tuple[int, int]:
        count = state.count
        rows: list[tuple[str, str, int, str, str | None]] = []
        offset = state.offset
        for end, message in _complete_lines(path, state.offset):
            offset = end
            if message is None:
                continue
            role, content, ts = message
            if role in ("user", "assistant") and content:
                rows.append((content, str(path), count, role, ts))
            count += 1
        first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM rows").fetchone()[0]
        conn.executemany(
            "INSERT INTO rows (content, path, idx, role, ts) VALUES (?, ?, ?, ?, ?)", rows
        )
        conn.execute(
            "INSERT INTO messages (rowid, content) SELECT id, content FROM rows WHERE id >= ?",
            (first,),
        )
        return offset, count

    # --- searching --------------------------------------------------------------------------
    def search(
        self, files: dict[Path, str], query: str, limit: int, *, one_session: bool
    ) -> list[HistoryHit]:
        """The newest `limit` messages of `files` (path -> session id) containing every word.

        One session: newest by position in its history. Several: the newest indexed (rows are
        added in history order as the sessions grow), shown by timestamp.
        """
        terms = [t for t in query.lower().split() if t]
        if not terms or limit < 1:
            return []
        conn = self._open()
        try:
            self.refresh(conn, files)
            names = dict(conn.execute("SELECT path, session FROM files").fetchall())
            return self._query(conn, files, names, terms, limit, one_session=one_session)
        finally:
            conn.close()

    @staticmethod
    def _small_share(conn: sqlite3.Connection, path: Path) -> bool:
        """Whether one session holds under a tenth of the indexed messages."""
        mine, total = conn.execute(
            "SELECT coalesce(sum(CASE WHEN path = ? THEN count END), 0), "
            "coalesce(sum(count), 0) FROM files",
            (str(path),),
        ).fetchone()
        return int(mine) * 10 < int(total)

    def _query(
        self,
        conn: sqlite3.Connection,
        files: dict[Path, str],
        names: dict[str, str],
        terms: list[str],
        limit: int,
        *,
        one_session: bool,
    ) -> list[HistoryHit]:
        fts = _fts_query(terms)
        if one_session and fts is not None and self._small_share(conn, next(iter(files))):
            fts = None  # fewer rows to read walking the session than walking every match
        where, params = [], []
        if fts is not None:
            # Driven by the FTS5 match in descending rowid order, so the search stops after
            # `limit` hits instead of sorting every match.
            sql = (
                "SELECT r.content, r.path, r.idx, r.role, r.ts FROM messages m "
                "JOIN rows r ON r.id = m.rowid WHERE messages MATCH ?"
            )
            params.append(fts)
            order = "m.rowid DESC"
        else:
            sql = "SELECT content, path, idx, role, ts FROM rows r WHERE 1"
            order = "r.id DESC"
        if one_session:
            (only,) = files
            where.append("r.path = ?")
            params.append(str(only))
        for fragment in where:
            sql += " AND " + fragment
        hits: list[HistoryHit] = []
        wanted = {str(p) for p in files}
        rows = conn.execute(f"{sql} ORDER BY {order}", params)
        for content, path, idx, role, ts in rows:
            if path not in wanted:
                continue
            snippet = match_snippet(content, terms)
            if snippet is None:
                continue
            session = None if one_session else names.get(path)
            hits.append(HistoryHit("history", int(idx), role, ts, snippet, session=session))
            if len(hits) >= limit:
                break
        if not one_session:
            hits.sort(key=lambda hit: hit.ts or "", reverse=True)
        return hits


_Parsed = tuple[str, str, str | None]


def _complete_lines(path: Path, start: int) -> Iterator[tuple[int, _Parsed | None]]:
    """(end offset, (role, content, ts) or None for a damaged line) for each whole line.

    A last line without its newline is still being written (or torn): it is left for the
    next catch-up, so its offset is not passed.
    """
    with path.open("rb") as handle:
        handle.seek(start)
        offset = start
        for raw in handle:
            if not raw.endswith(b"\n"):
                return
            offset += len(raw)
            if not raw.strip():
                continue
            yield offset, _parse(raw)


def _parse(raw: bytes) -> _Parsed | None:
    try:
        data = json.loads(raw)
        role, content, ts = data["role"], data.get("content"), data.get("ts")
    except (ValueError, TypeError, KeyError):
        return None
    if role not in ("system", "user", "assistant", "tool"):
        return None
    if content is not None and not isinstance(content, str):
        return None
    return role, content or "", None if ts is None else str(ts)
