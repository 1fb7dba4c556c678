"""Turn journals: one JSON-lines file per turn in flight that asked for tools.

`<data dir>/gateway/journal/<safe name of the turn key>.jsonl`, beside the outbox and the
pending runs. Each record (a model answer that asks for tools, a tool call's start, its
result) is appended whole before the turn acts on it, and fsync'd when losing it to a power
loss would matter: a model answer always (it is never asked for twice), the start and result
of a call that must not run twice (a side effect); the start and result of a call that may
run again (read-only, idempotent) are made durable by the next fsync of the file, and a
power loss before that only runs the call again. The directory is fsync'd when a journal
is created, so the file itself survives a power loss. A process killed at any point loses
nothing written. A turn without tool
calls never creates one. The router removes a journal once the turn is in the history and
its reply delivered (or the inbound is done otherwise).

Reading back tolerates what a crash leaves: a torn last line or a corrupt line ends the
journal there (the turn resumes from the last good record); the damage is logged once and
cut off, so the records appended after the resume are read again next time.

The daemon is the journals' only writer (one daemon per data dir; `squidd chat` keeps none),
so after one listing it knows which exist: the look-up each new turn makes, which finds
none, costs no file operation, and neither does removing a journal that was never written.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import structlog

from squidd.core.journal import RecordedAnswer, Replay, turn_key
from squidd.core.models import ChannelName, SourceId, ToolCall, utcnow
from squidd.core.ports import HandledLog, TurnJournal
from squidd.errors import StorageError
from squidd.fs import fsync_dir, make_private_dir, open_private, safe_name, write_all
from squidd.store.records import TOOL_CALL
from squidd.text import utf8

log = structlog.get_logger()

SUFFIX = ".jsonl"


def _decode(path: Path) -> tuple[Replay | None, int | None, dict[str, Any]]:
    """The journal's good records as a Replay, the offset where damage starts (None if
    none) and what its first record says (session, start time)."""
    raw = path.read_bytes()
    replay: Replay | None = None
    head: dict[str, Any] = {}
    offset = 0
    for line in raw.splitlines(keepends=True):
        try:
            if not line.endswith(b"\n"):
                raise ValueError("torn")  # noqa: TRY301 - one path for every kind of damage
            record = json.loads(line)
            kind = record["t"]
            if replay is None:
                head = record
                replay = Replay(started_at=datetime.fromisoformat(record["at"]))
            if kind == "answer":
                calls = tuple(TOOL_CALL.load(c) for c in record["calls"])
                replay.answers.append(RecordedAnswer(str(record["text"]), calls, record["at"]))
            elif kind == "start":
                replay.started.add(str(record["id"]))
            elif kind == "result":
                replay.results[str(record["id"])] = str(record["content"])
            else:
                raise ValueError(kind)  # noqa: TRY301
        except (ValueError, KeyError, TypeError, AttributeError):
            return replay, offset, head
        offset += len(line)
    return replay, None, head


def _head(path: Path) -> dict[str, Any]:
    """What a journal's first record says (its turn key, session, start), {} if unreadable."""
    try:
        return _decode(path)[2]
    except OSError:
        return {}


class JournalDir:
    """Implements `squidd.core.ports.TurnJournal` on a directory of JSON-lines files."""

    def __init__(self, data_dir: Path) -> None:
        self._dir = data_dir / "gateway" / "journal"
        self._present: set[str] | None = None  # file names, once listed
        self._listing = anyio.Lock()
        self._resumed: set[str] = set()

    def path(self, turn: str) -> Path:
        return self._dir / f"{safe_name(turn)}{SUFFIX}"

    def _names_sync(self) -> set[str]:
        try:
            return {p.name for p in self._dir.iterdir() if p.name.endswith(SUFFIX)}
        except FileNotFoundError:
            return set()

    async def _names(self) -> set[str]:
        if self._present is None:
            async with self._listing:
                if self._present is None:
                    self._present = await anyio.to_thread.run_sync(self._names_sync)
        return self._present

    # --- reading ---------------------------------------------------------------------------

    def _load_sync(self, path: Path) -> Replay | None:
        try:
            replay, damaged_at, _ = _decode(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot read a turn journal: {exc.strerror or exc}") from exc
        if damaged_at is not None:
            log.warning("turn_journal_damaged", file=path.name, kept_bytes=damaged_at)
            # Cut the damage off, so that what the resumed turn appends is read next time.
            with open(path, "r+b") as handle:
                handle.truncate(damaged_at)
                os.fsync(handle.fileno())
        return replay

    async def holds(self, turn: str) -> bool:
        return self.path(turn).name in await self._names()

    async def load(self, turn: str) -> Replay | None:
        """What the turn recorded before, None if it recorded nothing."""
        path = self.path(turn)
        if path.name not in await self._names():
            return None
        replay = await anyio.to_thread.run_sync(self._load_sync, path)
        if replay is not None:
            self._resumed.add(path.name)
        return replay

    # --- recording -------------------------------------------------------------------------

    def _append_sync(self, path: Path, record: dict[str, Any], new: bool, durable: bool) -> None:
        # One writer (the daemon), and damage is cut off when read: no lock, no torn-line
        # check, just the whole line appended and made durable.
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            if new:
                make_private_dir(path.parent)
            fd = open_private(path, os.O_WRONLY | os.O_APPEND)
            try:
                write_all(fd, utf8(line))
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if new:
                fsync_dir(path.parent)
        except OSError as exc:
            raise StorageError(f"cannot write a turn journal: {exc.strerror or exc}") from exc

    async def _append(self, key: str, kind: str, durable: bool = True, **fields: Any) -> None:
        path = self.path(key)
        present = await self._names()
        new = path.name not in present
        record = {"t": kind, "at": utcnow().isoformat(), **fields}
        await anyio.to_thread.run_sync(self._append_sync, path, record, new, durable)
        present.add(path.name)

    async def answer(self, turn: str, session: str, text: str, calls: Sequence[ToolCall]) -> None:
        await self._append(
            turn,
            "answer",
            turn=turn,
            session=session,
            text=text,
            calls=[TOOL_CALL.dump(c) for c in calls],
        )

    async def started(self, turn: str, call: ToolCall, *, durable: bool = True) -> None:
        await self._append(turn, "start", durable=durable, id=call.id, name=call.name)

    async def result(self, turn: str, call_id: str, content: str, *, durable: bool = True) -> None:
        await self._append(turn, "result", durable=durable, id=call_id, content=content)

    async def remove(self, turn: str) -> None:
        path = self.path(turn)
        present = await self._names()
        if path.name not in present:
            return
        try:
            await anyio.to_thread.run_sync(_unlink, path)
        except OSError as exc:
            raise StorageError(f"cannot remove a turn journal: {exc.strerror or exc}") from exc
        present.discard(path.name)
        self._resumed.discard(path.name)

    async def sweep(self, done: Callable[[ChannelName, SourceId], Awaitable[bool]]) -> int:
        """Remove the journals of messages `done` already (a crash between recording the
        message as handled and removing its journal); at start. The count removed."""
        removed = 0
        for name in list(await self._names()):
            head = await anyio.to_thread.run_sync(_head, self._dir / name)
            channel, _, source = str(head.get("turn", "")).partition(":")
            if source and await done(ChannelName(channel), SourceId(source)):
                await self.remove(f"{channel}:{source}")
                removed += 1
        if removed:
            log.info("turn_journals_swept", removed=removed)
        return removed

    # --- status ----------------------------------------------------------------------------

    def _in_flight_sync(self, names: Sequence[str]) -> list[dict[str, Any]]:
        turns = []
        for name in sorted(names):
            try:
                replay, _, head = _decode(self._dir / name)
            except OSError:
                continue
            turns.append(
                {
                    "turn": str(head.get("turn", "")),
                    "session": str(head.get("session", "")),
                    "started_at": str(head.get("at", "")),
                    "tool_calls": 0 if replay is None else len(replay.started),
                    "resumed": name in self._resumed,
                }
            )
        return turns

    async def in_flight(self) -> list[dict[str, Any]]:
        """For `squidd status`: each journal's session, start, tool calls, and whether this
        daemon resumed it."""
        names = list(await self._names())
        return await anyio.to_thread.run_sync(self._in_flight_sync, names)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class JournalCleanup:
    """A `HandledLog` that drops the turn's journal right after the message is recorded as
    done (its reply delivered, refused for good or parked): the turn is in the history by
    then, and the journal has served. A crash between the two leaves a journal of a handled
    message, which `JournalDir.sweep` removes at the next start."""

    def __init__(self, handled: HandledLog, journal: TurnJournal) -> None:
        self._handled = handled
        self._journal = journal

    async def contains(self, channel: ChannelName, source_id: SourceId) -> bool:
        return await self._handled.contains(channel, source_id)

    async def failed(self, channel: ChannelName, source_id: SourceId) -> bool:
        return await self._handled.failed(channel, source_id)

    async def add(self, channel: ChannelName, source_id: SourceId, *, failed: bool = False) -> None:
        await self._handled.add(channel, source_id, failed=failed)
        await self._journal.remove(turn_key(channel, source_id))
