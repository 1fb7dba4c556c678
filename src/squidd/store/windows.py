"""A session's history lines parsed, and the windows of recent sessions kept parsed between
turns, so a turn parses only what was appended since the last one.

A turn's window is the messages after the consolidation cursor (store/jsonl.py). Parsing it
whole on every turn cost a 24-turn session about 0.5-0.9 ms of CPU per turn, more than the
rest of a turn's file work, and it grows with the window. The history is append-only, so a
window parsed before is still right while the file is the same file (inode) and its start
(the cursor's offset) is the same: when the file's stamp (size, mtime, ctime) has not moved
it is used as it is; when the file only grew, the bytes after its last parsed line are
parsed and added. Anything else (a new cursor, a replaced or shorter file) parses the window
anew. Stamps are taken before reading: a line appended during the read shows up next time.
Bounded: the windows of the `MAX_WINDOWS` sessions read last are kept, the least recently
read dropped first (a household has a few sessions in use; more cost one parse each, as
before). Turns of one session never overlap; the table is locked for turns of different
sessions reading at once in worker threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from squidd.core.models import Message
from squidd.errors import StorageError
from squidd.store.records import MESSAGE

__all__ = ["MAX_WINDOWS", "MessageLine", "WindowCache", "iter_messages"]

log = structlog.get_logger()

MAX_WINDOWS = 64


@dataclass(frozen=True, slots=True)
class MessageLine:
    offset: int
    end: int
    message: Message


def iter_messages(path: Path, start: int = 0) -> Iterator[MessageLine]:
    """Messages of a JSONL file from byte `start` on; damaged lines are skipped and logged."""
    for line in _lines(path, start):
        if line.message is not None:
            yield MessageLine(line.offset, line.end, line.message)


@dataclass(frozen=True, slots=True)
class _Line:
    offset: int
    end: int
    message: Message | None  # None: a damaged whole line, skipped and logged


def _lines(path: Path, start: int) -> Iterator[_Line]:
    """Each whole line of a JSONL file from byte `start` on, a damaged one as None (logged
    once per read); a torn last line (no newline yet) is logged and not passed: the next
    append terminates it, after which it is a damaged whole line."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with handle:
        handle.seek(start)
        offset = start
        for raw in handle:
            end = offset + len(raw)
            line_offset = offset
            offset = end
            if not raw.strip():
                continue
            try:
                message = MESSAGE.loads(raw)
            except (ValueError, TypeError, KeyError) as exc:
                torn = not raw.endswith(b"\n")
                log.warning(
                    "history_line_skipped",
                    file=str(path),
                    offset=line_offset,
                    reason="torn last line" if torn else f"{type(exc).__name__}",
                )
                if not torn:
                    yield _Line(line_offset, end, None)
                continue
            yield _Line(line_offset, end, message)


_Stamp = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns


@dataclass(slots=True)
class _Kept:
    stamp: _Stamp
    start: int
    end: int  # where the line after the last parsed one starts
    messages: list[Message]


class WindowCache:
    """The parsed windows of the sessions read last (see the module)."""

    def __init__(self, max_windows: int = MAX_WINDOWS) -> None:
        self._max = max_windows
        self._kept: OrderedDict[Path, _Kept] = OrderedDict()
        self._lock = threading.Lock()

    def messages(self, path: Path, start: int) -> list[Message]:
        """The messages of `path` from byte `start` on (blocking: for a worker thread)."""
        try:
            info = path.stat()
        except FileNotFoundError:
            self._forget(path)
            return []
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        with self._lock:
            kept = self._kept.pop(path, None)
        if kept is None or kept.start != start or not _grew(kept.stamp, stamp):
            kept = _Kept(stamp, start, start, [])
        if kept.stamp != stamp or not kept.messages:
            for line in _lines(path, kept.end):
                if line.message is not None:
                    kept.messages.append(line.message)
                kept.end = line.end  # past a damaged whole line too: logged once, not each turn
            kept.stamp = stamp
        with self._lock:
            self._kept[path] = kept
            while len(self._kept) > self._max:
                self._kept.popitem(last=False)
        return list(kept.messages)

    def _forget(self, path: Path) -> None:
        with self._lock:
            self._kept.pop(path, None)


def _grew(before: _Stamp, now: _Stamp) -> bool:
    """The same file, as long or longer: what was parsed of it still stands."""
    return before[0] == now[0] and before[1] <= now[1]
