"""The dashboard's sessions: each history file's last activity, message count and summary.

A message count comes from counting lines, incrementally: each file's inode, size and
count are remembered, and a later look reads only the bytes appended since (a replaced or
shrunk file is counted again). All file work runs in a worker thread, so no page does work
on the event loop that grows with the history; after the first look, the work is bounded
by what was added.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import anyio

FILE_NAME = re.compile(r"^[a-z0-9._-]{1,60}-[0-9a-f]{20}$")
CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SessionRow:
    file: str
    session_id: str
    last_activity: str
    messages: int
    summary: str


class SessionCounts:
    def __init__(self, data_dir: Path) -> None:
        self._sessions = data_dir / "sessions"
        self._memory = data_dir / "memory"
        self._counts: dict[str, tuple[int, int, int]] = {}  # file -> (inode, size, lines)

    def _count(self, path: Path, stat: os.stat_result) -> int:
        inode, size, lines = self._counts.get(path.name, (-1, 0, 0))
        start = size if inode == stat.st_ino and stat.st_size >= size else 0
        if start == 0:
            lines = 0
        with path.open("rb") as handle:
            handle.seek(start)
            while chunk := handle.read(CHUNK):
                lines += chunk.count(b"\n")
        self._counts[path.name] = (stat.st_ino, stat.st_size, lines)
        return lines

    def _row(self, stem: str) -> SessionRow | None:
        path = self._sessions / f"{stem}.jsonl"
        try:
            stat = path.stat()
            messages = self._count(path, stat)
        except OSError:
            return None
        session_id = stem
        try:
            meta = json.loads((self._sessions / f"{stem}.meta.json").read_text("utf-8"))
            session_id = str(meta.get("session_id") or stem)
        except (OSError, ValueError, AttributeError):
            pass
        try:
            summary = (self._memory / stem / "summary.md").read_text("utf-8")[:4000]
        except (OSError, UnicodeDecodeError):
            summary = ""
        when = datetime.fromtimestamp(stat.st_mtime, UTC).isoformat(timespec="seconds")
        return SessionRow(stem, session_id, when, messages, summary)

    def _all(self) -> list[SessionRow]:
        try:
            stems = [p.name[: -len(".jsonl")] for p in os.scandir(self._sessions)]
        except OSError:
            return []
        rows = [self._row(s) for s in stems if FILE_NAME.match(s)]
        return sorted((r for r in rows if r), key=lambda r: r.last_activity, reverse=True)

    async def all(self) -> list[SessionRow]:
        return await anyio.to_thread.run_sync(self._all)

    async def one(self, stem: str) -> SessionRow | None:
        """The session of this file name; None for a name that is not one (no traversal)."""
        if not FILE_NAME.match(stem):
            return None
        return await anyio.to_thread.run_sync(self._row, stem)
