"""The dashboard's sessions: each history file's channel, last activity, message count,
size, last message and summary.

A message count comes from counting lines, incrementally: each file's inode, size and
count are remembered, and a later look reads only the bytes appended since (a replaced or
shrunk file is counted again). All file work runs in a worker thread, so no page does work
on the event loop that grows with the history; after the first look, the work is bounded
by what was added. The last message is read from the file's end (a few kB) and kept until
the file changes.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import anyio

from squidd.store.records import MESSAGE
from squidd.web.conversation import lines_backwards
from squidd.web.usage_days import channel_of

FILE_NAME = re.compile(r"^[a-z0-9._-]{1,60}-[0-9a-f]{20}$")
CHUNK = 1024 * 1024


LAST_CHARS = 160


@dataclass(frozen=True, slots=True)
class SessionRow:
    file: str
    session_id: str
    last_activity: str
    messages: int
    summary: str
    size: int = 0
    last_message: str = ""
    people: tuple[str, ...] = ()
    """Who spoke in it, as the store records beside the history (`<name>.people.json`)."""

    @property
    def channel(self) -> str:
        return channel_of(self.session_id)

    @property
    def with_whom(self) -> str:
        """Who the conversation is with: the people who spoke in it, else as far as its
        name tells (`email:bob@x` -> `bob@x`)."""
        if self.people:
            return ", ".join(self.people)
        return self.session_id.split(":", 1)[1] if self.channel != "other" else ""

    @property
    def size_text(self) -> str:
        return f"{self.size / 1024:,.1f} kB" if self.size >= 1024 else f"{self.size} B"


def _last_message(path: Path) -> str:
    for raw in lines_backwards(path, 4096):
        try:
            message = MESSAGE.loads(raw.decode("utf-8", "replace"))
        except (ValueError, KeyError, TypeError):
            continue
        text = " ".join((message.content or "").split())
        if not text and message.tool_calls:
            text = "calls " + ", ".join(call.name for call in message.tool_calls)
        cut = text if len(text) <= LAST_CHARS else text[: LAST_CHARS - 1] + "…"
        return f"{message.role}: {cut}"
    return ""


def _people(path: Path, stem: str) -> tuple[str, tuple[str, ...]]:
    """The session id and the people a session's people file names (none: `stem`, ())."""
    try:
        data = json.loads(path.read_text("utf-8"))
        people = tuple(str(p) for p in data["people"])[:20]
        return str(data.get("session_id") or stem), people
    except (OSError, ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
        return stem, ()


class SessionCounts:
    def __init__(self, data_dir: Path) -> None:
        self._sessions = data_dir / "sessions"
        self._memory = data_dir / "memory"
        self._counts: dict[str, tuple[int, int, int]] = {}  # file -> (inode, size, lines)
        self._lasts: dict[str, tuple[int, int, str]] = {}  # file -> (inode, size, message)

    def _last(self, path: Path, stat: os.stat_result) -> str:
        inode, size, text = self._lasts.get(path.name, (-1, -1, ""))
        if (inode, size) != (stat.st_ino, stat.st_size):
            text = _last_message(path)
            self._lasts[path.name] = (stat.st_ino, stat.st_size, text)
        return text

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
            last = self._last(path, stat)
        except OSError:
            return None
        session_id, people = _people(self._sessions / f"{stem}.people.json", stem)
        try:
            meta = json.loads((self._sessions / f"{stem}.meta.json").read_text("utf-8"))
            session_id = str(meta.get("session_id") or session_id)
        except (OSError, ValueError, AttributeError):
            pass
        try:
            summary = (self._memory / stem / "summary.md").read_text("utf-8")[:4000]
        except (OSError, UnicodeDecodeError):
            summary = ""
        when = datetime.fromtimestamp(stat.st_mtime, UTC).isoformat(timespec="seconds")
        return SessionRow(stem, session_id, when, messages, summary, stat.st_size, last, people)

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
