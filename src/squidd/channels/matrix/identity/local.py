"""The identity's files in the data dir, next to the Matrix channel's other state.

Under `<data_dir>/matrix/` (all 0600, the folder 0700):
* `identity.json`     — the account's user id and the three private cross-signing keys
                        (unpadded base64 seeds). Written with fsync before any upload, so a
                        crash never leaves the server with keys we lost;
* `recovery-key.txt`  — the secret storage recovery key of an identity the daemon created on
                        its own; `squidd matrix bootstrap` shows it once and deletes it;
* `pins.json`         — the master key pinned for each allowed user (trust by identity);
* `trust-requests/`   — one file per `squidd matrix trust USER` waiting for the daemon;
* `identity.lock`     — held while an identity is created or restored, so the daemon and a
                        command never make two identities for one account.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import structlog
from unpaddedbase64 import encode_base64

from squidd.channels.matrix.identity.cross_signing import (
    MASTER,
    SELF_SIGNING,
    USER_SIGNING,
    CrossSigningKeys,
)
from squidd.channels.matrix.identity.signed_json import b64decode
from squidd.errors import StorageError
from squidd.fs import (
    atomic_write_text,
    make_private_dir,
    read_json_object,
    read_text_or_empty,
    safe_name,
    write_json_object,
)

log = structlog.get_logger()


SECRET_FILES = ("matrix/identity.json", "matrix/recovery-key.txt")
"""This module's files that hold secrets (the private cross-signing keys; the recovery
key), relative to the data dir: a backup leaves them out unless asked."""


class IdentityFiles:
    """Paths and (de)serialisation; blocking work runs in threads."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "matrix"
        self.identity_path = data_dir / SECRET_FILES[0]
        self.recovery_path = data_dir / SECRET_FILES[1]
        self.pins_path = self.root / "pins.json"
        self.requests_dir = self.root / "trust-requests"
        self.lock_path = self.root / "identity.lock"

    async def prepare(self) -> None:
        def make() -> None:
            try:
                make_private_dir(self.requests_dir)
            except OSError as exc:
                raise StorageError(f"cannot create {self.root}: {exc.strerror or exc}") from exc

        await anyio.to_thread.run_sync(make)

    @contextlib.asynccontextmanager
    async def lock(self) -> AsyncIterator[None]:
        """Exclusive across processes: creating or restoring an identity."""
        await self.prepare()
        fd = await anyio.to_thread.run_sync(
            lambda: os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        )
        try:
            await anyio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_EX, abandon_on_cancel=True)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    async def _read_json(self, path: Path) -> dict[str, Any] | None:
        data = await anyio.to_thread.run_sync(read_json_object, path)
        if data is None and await anyio.Path(path).exists():
            log.warning("matrix_identity_file_unreadable", path=str(path))
        return data

    async def _write_json(self, path: Path, data: dict[str, Any]) -> None:
        await anyio.to_thread.run_sync(write_json_object, path, data)

    # --- the private keys ----------------------------------------------------------------------

    async def load_keys(self, user_id: str) -> CrossSigningKeys | None:
        """The kept keys of `user_id`, or None (none kept, another account's, or damaged)."""
        data = await self._read_json(self.identity_path)
        if data is None:
            return None
        if data.get("user_id") != user_id:
            log.warning("matrix_identity_of_other_account_ignored", path=str(self.identity_path))
            return None
        try:
            return CrossSigningKeys.from_seeds(
                {name: b64decode(data[name]) for name in (MASTER, SELF_SIGNING, USER_SIGNING)}
            )
        except (KeyError, ValueError):
            log.warning("matrix_identity_file_damaged", path=str(self.identity_path))
            return None

    async def save_keys(self, user_id: str, keys: CrossSigningKeys) -> None:
        data: dict[str, Any] = {"user_id": user_id}
        data.update({name: encode_base64(seed) for name, seed in keys.seeds().items()})
        await self.prepare()
        await self._write_json(self.identity_path, data)

    async def put_back(self, user_id: str, keys: CrossSigningKeys | None) -> None:
        """Undo a `save_keys` whose upload failed: the earlier keys, or none."""
        if keys is None:
            await anyio.Path(self.identity_path).unlink(missing_ok=True)
        else:
            await self.save_keys(user_id, keys)

    # --- the recovery key of a daemon-made identity -------------------------------------------

    async def save_recovery_key(self, recovery_key: str) -> None:
        await anyio.to_thread.run_sync(atomic_write_text, self.recovery_path, recovery_key + "\n")

    async def take_recovery_key(self) -> str | None:
        """The kept recovery key, removed from the disk as it is handed out (shown once)."""
        text = await anyio.to_thread.run_sync(read_text_or_empty, self.recovery_path)
        if not text.strip():
            return None
        await anyio.Path(self.recovery_path).unlink(missing_ok=True)
        return text.strip()

    async def has_recovery_key_file(self) -> bool:
        return await anyio.Path(self.recovery_path).exists()

    # --- pins and trust requests ---------------------------------------------------------------

    async def load_pins(self) -> dict[str, str]:
        data = await self._read_json(self.pins_path) or {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}

    async def save_pins(self, pins: dict[str, str]) -> None:
        await self.prepare()
        await self._write_json(self.pins_path, pins)

    def request_path(self, user_id: str) -> Path:
        return self.requests_dir / (safe_name(user_id) + ".json")

    async def request_trust(self, user_id: str, master: str | None) -> Path:
        """Leave a request for the daemon to accept `user_id`'s current (or this) identity."""
        await self.prepare()
        path = self.request_path(user_id)
        await self._write_json(path, {"user_id": user_id, "master": master})
        return path

    async def take_requests(self) -> list[tuple[str, str | None]]:
        """The waiting trust requests (user, master key or None), removed as they are read."""
        requests: list[tuple[str, str | None]] = []
        folder = anyio.Path(self.requests_dir)
        if not await folder.exists():
            return requests
        async for entry in folder.iterdir():
            data = await self._read_json(Path(entry))
            await entry.unlink(missing_ok=True)
            user = data.get("user_id") if data else None
            master = data.get("master") if data else None
            if isinstance(user, str):
                requests.append((user, master if isinstance(master, str) else None))
        return requests
