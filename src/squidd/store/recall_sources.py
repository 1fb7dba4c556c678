"""What recall embeds, read from the agent's store: the messages past each history file's
cursor, and the summaries' paragraphs and MEMORY.md entries as they are now.

A history cursor is the file's inode, the byte offset indexed so far and the number of
messages before it; it stops only at a whole line (a line still being written, or a torn one
a crash left, waits for the next pass, and is no news before then: the indexer's pass ends).
A file replaced (another inode) or shrunk is read again from its start. Tool
calls and results are not embedded, only what a person and the assistant said.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import structlog
from pydantic import TypeAdapter

from squidd.store.jsonl import JsonlStore
from squidd.store.windows import iter_messages

__all__ = [
    "CHUNK",
    "MAX_CHUNK_CHARS",
    "Chunk",
    "Cursor",
    "Pending",
    "pending_messages",
    "wanted_docs",
]

log = structlog.get_logger()

MAX_CHUNK_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Chunk:
    """One piece of memory that is embedded: a message, a summary paragraph or a MEMORY.md
    entry, with where it came from."""

    source: Literal["history", "summary", "memory"]
    session: str
    """The session id (history, summary); "" for MEMORY.md."""
    index: int
    """The message's number in its session, or the paragraph's / entry's number."""
    text: str
    ts: str | None = None
    person: str | None = None
    """Who said it (history); whose MEMORY.md it is (memory: the `safe_name` of the person,
    as its folder is named; None: the shared one)."""
    role: str = ""


CHUNK: TypeAdapter[Chunk] = TypeAdapter(Chunk)


@dataclass(frozen=True, slots=True)
class Cursor:
    inode: int
    offset: int
    count: int


@dataclass
class Pending:
    """Messages not embedded yet and where each file's cursor goes once they are."""

    chunks: list[Chunk] = field(default_factory=list)
    cursors: dict[str, Cursor] = field(default_factory=dict)


def pending_messages(store: JsonlStore, cursors: Mapping[str, Cursor], limit: int) -> Pending:
    """Up to `limit` messages past the cursors (by file name), in file order."""
    found = Pending()
    for path, session in store.session_files().items():
        if len(found.chunks) >= limit:
            break
        key = path.name
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        cursor = cursors.get(key) or Cursor(stat.st_ino, 0, 0)
        if cursor.inode != stat.st_ino or stat.st_size < cursor.offset:
            log.warning("recall_history_replaced", file=key, effect="indexed again")
            cursor = Cursor(stat.st_ino, 0, 0)
        if stat.st_size == cursor.offset:
            continue
        offset, count = cursor.offset, cursor.count
        whole = _ends_line(path, stat.st_size)
        for line in iter_messages(path, cursor.offset):
            if len(found.chunks) >= limit or line.end > stat.st_size:
                break
            if line.end == stat.st_size and not whole:
                break  # a line still being written: the next pass takes it
            message = line.message
            if message.role in ("user", "assistant") and (message.content or "").strip():
                text = (message.content or "").strip()[:MAX_CHUNK_CHARS]
                found.chunks.append(
                    Chunk("history", session, count, text, message.ts, message.by, message.role)
                )
            offset, count = line.end, count + 1
        moved = Cursor(stat.st_ino, offset, count)
        if moved != cursors.get(key):  # a torn or unfinished last line alone is no news
            found.cursors[key] = moved
    return found


def wanted_docs(store: JsonlStore) -> list[Chunk]:
    """Every summary paragraph and MEMORY.md entry as it is now, dated by its file's last
    change (when that summary or memory was written)."""
    docs: list[Chunk] = []
    for _path, session in store.session_files().items():
        path = store.summary_path(session)
        when = _changed(path)
        for i, para in enumerate(_paragraphs(_read(path))):
            docs.append(Chunk("summary", session, i, para, when, role="summary"))
    people = store.global_memory_path.parent / "people"
    owners: list[tuple[str | None, Path]] = [(None, store.global_memory_path)]
    owners += [(p.name, p / "MEMORY.md") for p in sorted(people.glob("*")) if p.is_dir()]
    for person, path in owners:
        when = _changed(path)
        for i, entry in enumerate(_paragraphs(_read(path))):
            docs.append(Chunk("memory", "", i, entry, when, person=person, role="memory"))
    return docs


def _changed(path: Path) -> str | None:
    try:
        stamp = path.stat().st_mtime
    except FileNotFoundError:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def _ends_line(path: Path, size: int) -> bool:
    """The file's first `size` bytes end with a whole line."""
    if size == 0:
        return True
    with path.open("rb") as handle:
        handle.seek(size - 1)
        return handle.read(1) == b"\n"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _paragraphs(text: str) -> list[str]:
    """Entries of a summary or MEMORY.md: its paragraphs and list items."""
    parts: list[str] = []
    for para in text.split("\n\n"):
        items = [line for line in para.splitlines() if line.lstrip().startswith(("- ", "* "))]
        if items and len(items) == len([x for x in para.splitlines() if x.strip()]):
            parts.extend(item.strip()[2:].strip() for item in items)
        elif para.strip():
            parts.append(para.strip()[:MAX_CHUNK_CHARS])
    return [p for p in parts if p]
