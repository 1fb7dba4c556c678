"""The dead-letter folder: inputs parked after repeated failures, kept until an operator acts.

`<data dir>/parked/<id>.json`, one file per parked input (core/poison.py `Parked`): where it
came from, the reason and the exception's type, the attempts made, what is needed to run it
again, and the reply that could not be delivered. Written atomically and fsynced; nothing
here is ever deleted except by `squidd parked drop ID` or by a retry that delivered it.

The daemon parks and sends again; `squidd parked` (another process, daemon running or not)
lists, asks for a retry (the item's state becomes `retry`; the daemon picks it up at start
and every few seconds) or drops. Each change reads, changes and replaces one file under an
exclusive lock on `parked/.lock`, so the two processes never lose each other's change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import anyio
import structlog

from squidd.core.poison import Parked, ParkState
from squidd.errors import StorageError
from squidd.fs import atomic_write_text, lock_file
from squidd.store.records import INBOUND, PENDING_REPLY, Codec

__all__ = [
    "PARKED",
    "ParkedDir",
    "ParkedSummary",
    "UnknownParkedError",
    "ask_retry",
    "refuse_retrying",
]

log = structlog.get_logger()

_ID_CHARS = frozenset("0123456789abcdef")

PARKED: Codec[Parked] = Codec(
    Parked,
    fields={
        "inbound": Optional[INBOUND.stored],  # noqa: UP045 - a runtime type, made here
        "reply": Optional[PENDING_REPLY.stored],  # noqa: UP045
    },
)
"""A parked item's file: every field; its message without the hooks (see `INBOUND`)."""


class UnknownParkedError(LookupError):
    """No parked item has that id."""


def ask_retry(item: Parked) -> Parked:
    """The change a retry asks for (`squidd parked retry`, the dashboard): the item to be
    sent again; refused (ValueError, in words) when nothing was kept to send."""
    if not item.retryable:
        raise ValueError(
            f"{item.id} cannot be sent again: the {item.loop} loop kept nothing to send "
            "(ask the sender to send it again, then drop it)"
        )
    if item.state is ParkState.PARKED:
        return item.with_state(ParkState.RETRY)
    return item


def refuse_retrying(item: Parked) -> None:
    """The change a drop makes (the item removed), refused while it is being sent again."""
    if item.state is ParkState.RETRYING:
        raise ValueError(f"{item.id} is being sent again right now; drop it once that ended")


@dataclass(frozen=True, slots=True)
class ParkedSummary:
    """What `squidd status` shows: how many are parked and the newest one's reason."""

    count: int
    newest_reason: str = ""
    newest_id: str = ""
    newest_at: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "count": self.count,
            "newest_reason": self.newest_reason,
            "newest_id": self.newest_id,
            "newest_at": self.newest_at,
        }


class ParkedDir:
    """Implements `core.poison.DeadLetters`, and the operator's view of the folder."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir / "parked"

    # --- the synchronous core (the CLI calls these; the daemon through threads) -----------

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return lock_file(self.dir / ".lock", str(self.dir))

    def _path(self, item_id: str) -> Path:
        if not item_id or not set(item_id) <= _ID_CHARS:
            raise UnknownParkedError(item_id)
        return self.dir / f"{item_id}.json"

    def _read(self, path: Path) -> Parked:
        try:
            return PARKED.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(f"cannot read {path}: not a parked item") from exc

    def _write(self, item: Parked) -> None:
        atomic_write_text(self._path(item.id), PARKED.dumps(item, indent=1))

    def get_sync(self, item_id: str) -> Parked:
        try:
            return self._read(self._path(item_id))
        except FileNotFoundError:
            raise UnknownParkedError(item_id) from None

    def list_sync(self) -> list[Parked]:
        """Every readable item, oldest first; an unreadable file is logged and left alone."""
        try:
            paths = sorted(p for p in self.dir.iterdir() if p.suffix == ".json")
        except FileNotFoundError:
            return []
        items = []
        for path in paths:
            try:
                items.append(self._read(path))
            except FileNotFoundError:
                continue  # dropped since the listing
            except StorageError:
                log.warning("parked_item_unreadable", path=str(path))
        return sorted(items, key=lambda item: item.parked_at)

    def park_sync(self, item: Parked) -> None:
        with self._locked():
            try:
                earlier: Parked | None = self._read(self._path(item.id))
            except (FileNotFoundError, StorageError):
                earlier = None
            if earlier is not None:
                # Parked again after a retry: the operator's count and what it needs to run
                # again stay (a failure before the turn knows no reply of its own).
                item = item.with_state(
                    ParkState.PARKED,
                    retries=earlier.retries,
                    inbound=item.inbound or earlier.inbound,
                    reply=item.reply or earlier.reply,
                )
            self._write(item)

    def change_sync(self, item_id: str, change: Callable[[Parked], Parked | None]) -> Parked:
        """Apply `change` to one item under the lock: its result is written, or the item is
        removed when it returns None. Returns the item as it was before."""
        with self._locked():
            item = self.get_sync(item_id)
            changed = change(item)
            if changed is None:
                path = self._path(item_id)
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise StorageError(f"cannot remove {path}: {exc.strerror or exc}") from exc
            else:
                self._write(changed)
            return item

    def summary_sync(self) -> ParkedSummary:
        items = self.list_sync()
        if not items:
            return ParkedSummary(0)
        newest = items[-1]
        return ParkedSummary(
            len(items), newest.reason, newest.id, newest.parked_at.isoformat(timespec="seconds")
        )

    # --- the daemon's side ---------------------------------------------------------------

    async def park(self, item: Parked) -> None:
        await anyio.to_thread.run_sync(self.park_sync, item)

    async def list(self) -> list[Parked]:
        return await anyio.to_thread.run_sync(self.list_sync)

    async def change(self, item_id: str, change: Callable[[Parked], Parked | None]) -> Parked:
        return await anyio.to_thread.run_sync(self.change_sync, item_id, change)

    async def summary(self) -> ParkedSummary:
        return await anyio.to_thread.run_sync(self.summary_sync)
