"""The audit log on disk: one hash-chained JSON line per tool call, and its head apart.

`<data dir>/audit/calls.jsonl` holds the lines (core/audit.py: `seal` writes them,
`check_chain` checks them); `<data dir>/audit/head.json` holds the count of lines sealed,
the last line's hash and the log's size then. An append, under an exclusive lock on the log
(the daemon and a `squidd chat` may both append), writes the line and fsyncs it, then
replaces the head (atomic write, fsync'd): the head is never ahead of the log.

A crash between the two leaves one whole line past the head: the next append adopts it when
it follows the head's hash, and cuts off anything else past the head (a torn tail). A log
shorter than its head is not repaired: `verify` names the missing line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from squidd.core.audit import GENESIS, AuditEntry, ChainBroken, check_chain, seal
from squidd.errors import StorageError
from squidd.fs import (
    atomic_write_text,
    locked,
    make_private_dir,
    open_private,
    read_bytes_or_empty,
    write_all,
)
from squidd.store.records import Codec

log = structlog.get_logger()

__all__ = ["AuditFile", "Head"]


@dataclass(frozen=True)
class Head:
    lines: int
    hash: str
    size: int


HEAD: Codec[Head] = Codec(Head)
"""head.json: the lines, the last line's hash and the log's size they stand for."""

ENTRY: Codec[AuditEntry] = Codec(AuditEntry, omit_defaults=True)
"""One call's fields in the log, in the order they are sealed (core/audit.py `seal`); an
empty agent or person is left out, so a daemon of one agent writes the lines it always
wrote."""


def _head_of(raw: str) -> Head | None:
    if not raw.strip():
        return None
    try:
        return HEAD.loads(raw)
    except ValueError:
        raise StorageError("the audit head is not readable (changed or damaged)") from None


class AuditFile:
    """The audit log of one data dir (the `AuditSink` the turn steps write to)."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir / "audit"
        self.log_path = self.dir / "calls.jsonl"
        self.head_path = self.dir / "head.json"

    async def append(self, entry: AuditEntry) -> None:
        await anyio.to_thread.run_sync(self.append_sync, ENTRY.dump(entry))

    def read_head(self) -> Head | None:
        try:
            return _head_of(self.head_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"cannot read the audit head: {exc}") from None

    def _write_head(self, head: Head) -> None:
        atomic_write_text(self.head_path, HEAD.dumps(head, indent=None) + "\n")

    def _settle(self, fd: int, head: Head) -> Head:
        """The head after adopting a whole line written past it (a crash before the head
        was replaced) and cutting off a torn tail."""
        size = os.fstat(fd).st_size
        if size == head.size:
            return head
        if size < head.size:
            log.error("audit_log_shorter_than_head", lines=head.lines)
            return head
        os.lseek(fd, head.size, os.SEEK_SET)
        tail = os.read(fd, size - head.size)
        if tail.endswith(b"\n") and tail.count(b"\n") == 1:
            line = tail[:-1].decode("utf-8", "replace")
            try:
                record = json.loads(line)
                if record.get("n") == head.lines + 1 and record.get("prev") == head.hash:
                    adopted = Head(head.lines + 1, str(record["hash"]), size)
                    self._write_head(adopted)
                    return adopted
            except (json.JSONDecodeError, AttributeError, KeyError):
                pass
        log.warning("audit_torn_tail_cut", bytes=size - head.size)
        os.ftruncate(fd, head.size)
        os.fsync(fd)
        return head

    def append_sync(self, fields: dict[str, Any]) -> None:
        try:
            make_private_dir(self.dir)
            fd = open_private(self.log_path, os.O_RDWR | os.O_APPEND)
        except OSError as exc:
            raise StorageError(f"cannot open the audit log: {exc.strerror or exc}") from exc
        try:
            with locked(fd):
                head = self._settle(fd, self.read_head() or Head(0, GENESIS, 0))
                line = seal(head.lines + 1, head.hash, fields) + "\n"
                data = line.encode("ascii")
                write_all(fd, data)
                os.fsync(fd)
                record = json.loads(line)
                self._write_head(Head(head.lines + 1, record["hash"], head.size + len(data)))
        except OSError as exc:
            raise StorageError(f"cannot append to the audit log: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)

    def lines(self) -> list[str]:
        """The log's lines as written (ASCII JSON, one per call)."""
        raw = read_bytes_or_empty(self.log_path)
        text = raw.decode("utf-8", "replace")
        return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []

    def records(self) -> list[dict[str, Any]]:
        """The entries that parse, oldest first (for listing; `verify` judges the rest)."""
        found: list[dict[str, Any]] = []
        for line in self.lines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                found.append(record)
        return found

    def verify(self) -> tuple[int, str]:
        """(lines, last hash) when the chain holds; raises `ChainBroken` naming the first
        line that does not."""
        lines = self.lines()
        try:
            head = self.read_head()
        except StorageError as exc:
            raise ChainBroken(len(lines), str(exc)) from None
        last = check_chain(lines, None if head is None else (head.lines, head.hash))
        return len(lines), last
