"""What the Matrix channel keeps in the data dir, and when the sync position may advance.

Layout under `<data_dir>/matrix/` (file names never derive from room or user ids without
`safe_name`):
* `credentials.json` — user id, device id and access token of a password login (0600);
* `sync.json`        — the sync position (`next_batch`) of the last fully handled batch;
* `store/`           — matrix-nio's encryption store (Olm account, Megolm sessions) and its
                       device-trust files (`trust_name`).

`SyncLedger` holds the batches of the sync stream that still have unacknowledged events.
The persisted position advances to a batch's `next_batch` only when that batch and every
earlier one are done, so a crash re-delivers whatever was not answered yet.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog

from squidd.channels.matrix.ids import EventId, SyncToken
from squidd.errors import StorageError
from squidd.fs import (
    make_private_dir,
    read_json_object,
    safe_name,
    write_json_object,
)

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class Credentials:
    homeserver: str
    user_id: str
    device_id: str
    access_token: str


SECRET_FILES = ("matrix/credentials.json", "matrix/store")
"""This module's files that hold secrets (the access token; the Olm/Megolm keys), relative
to the data dir: a backup leaves them out unless asked (gateway/backups.py)."""


class MatrixFiles:
    """Paths and (de)serialisation of the channel's files; blocking work runs in threads."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "matrix"
        self.credentials_path = data_dir / SECRET_FILES[0]
        self.sync_path = self.root / "sync.json"
        self.store_dir = data_dir / SECRET_FILES[1]

    async def prepare(self) -> None:
        def make() -> None:
            try:
                make_private_dir(self.store_dir)
            except OSError as exc:
                raise StorageError(f"cannot create {self.root}: {exc.strerror or exc}") from exc

        await anyio.to_thread.run_sync(make)

    @staticmethod
    def store_name(user_id: str, device_id: str) -> str:
        """nio's store file name; nio would otherwise build it from the raw ids."""
        return safe_name(f"{user_id}|{device_id}") + ".db"

    @staticmethod
    def trust_name(user_id: str, device_id: str) -> str:
        """The stem of nio's device-trust files: nio's own `<user>_<device>` when that is a
        plain file name (so existing trust decisions are kept), else a `safe_name`."""
        raw = f"{user_id}_{device_id}"
        if "/" in raw or "\x00" in raw or raw.startswith("."):
            return safe_name(raw)
        return raw

    async def _read_json(self, path: Path) -> dict[str, Any] | None:
        data = await anyio.to_thread.run_sync(read_json_object, path)
        if data is None and await anyio.Path(path).exists():
            log.warning("matrix_state_file_unreadable", path=str(path))
        return data

    async def _write_json(self, path: Path, data: dict[str, Any]) -> None:
        await anyio.to_thread.run_sync(write_json_object, path, data)

    async def load_credentials(self) -> Credentials | None:
        data = await self._read_json(self.credentials_path)
        if data is None:
            return None
        try:
            return Credentials(
                homeserver=str(data["homeserver"]),
                user_id=str(data["user_id"]),
                device_id=str(data["device_id"]),
                access_token=str(data["access_token"]),
            )
        except KeyError:
            log.warning("matrix_credentials_incomplete", path=str(self.credentials_path))
            return None

    async def save_credentials(self, creds: Credentials) -> None:
        await self._write_json(
            self.credentials_path,
            {
                "homeserver": creds.homeserver,
                "user_id": creds.user_id,
                "device_id": creds.device_id,
                "access_token": creds.access_token,
            },
        )

    async def forget_credentials(self) -> None:
        await anyio.Path(self.credentials_path).unlink(missing_ok=True)

    async def load_sync_token(self, user_id: str) -> SyncToken | None:
        """The persisted position, or None on the very first start (or another account)."""
        data = await self._read_json(self.sync_path)
        if data is None:
            return None
        if data.get("user_id") != user_id:
            log.warning("matrix_sync_position_of_other_account_ignored")
            return None
        token = data.get("next_batch")
        return SyncToken(token) if isinstance(token, str) and token else None

    async def save_sync_token(self, user_id: str, token: SyncToken) -> None:
        await self._write_json(self.sync_path, {"user_id": user_id, "next_batch": token})


@dataclass(eq=False)
class Batch:
    """One sync response: its `next_batch` and the events still waiting for an ack.

    `token` is None for a batch that must not move the position (one whose processing was
    interrupted: the same range is fetched again and lands in a later batch).
    """

    token: SyncToken | None
    pending: set[EventId] = field(default_factory=set)
    sealed: bool = False


class SyncLedger:
    """Orders batches and persists the newest position whose batches are all done."""

    def __init__(self, save: Callable[[SyncToken], Awaitable[None]]) -> None:
        self._save = save
        self._batches: deque[Batch] = deque()
        self._lock = anyio.Lock()
        self.saved: SyncToken | None = None

    def open(self, token: SyncToken) -> Batch:
        batch = Batch(token)
        self._batches.append(batch)
        return batch

    def add(self, batch: Batch, event_id: EventId) -> None:
        batch.pending.add(event_id)

    async def seal(self, batch: Batch) -> None:
        """Everything of the batch was handed out; it is done once its events are acked."""
        batch.sealed = True
        await self._flush()

    async def abandon(self, batch: Batch) -> None:
        """Processing stopped half-way: keep its pending events, never save its token."""
        batch.token = None
        batch.sealed = True
        await self._flush()

    def withdraw(self, event_id: EventId) -> None:
        """An event that was never handed on: no ack will come; its batch must not move the
        position (the event is fetched again from there, into a later batch)."""
        for batch in self._batches:
            if event_id in batch.pending:
                batch.pending.discard(event_id)
                batch.token = None

    async def ack(self, batch: Batch, event_id: EventId) -> None:
        batch.pending.discard(event_id)
        await self._flush()

    async def _flush(self) -> None:
        async with self._lock:
            newest: SyncToken | None = None
            while self._batches and self._batches[0].sealed and not self._batches[0].pending:
                done = self._batches.popleft()
                if done.token is not None:
                    newest = done.token
            if newest is not None and newest != self.saved:
                await self._save(newest)
                self.saved = newest
