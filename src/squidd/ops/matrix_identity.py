"""The Matrix identity chores a person runs from the shell: bootstrap, restore, trust.

They need the account's access token (the configured one, or the kept login; a password
login if neither, which the daemon then reuses) and the HTTP API only: never matrix-nio's
device or crypto store, so they are safe while the daemon runs (a second process opening
that store corrupts Olm sessions). Creating or restoring takes the identity lock the daemon
takes too. `trust` leaves a request file that the running daemon picks up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from squidd.channels.matrix.client import resolve_credentials
from squidd.channels.matrix.identity.account import OwnIdentity, PasswordNeededError
from squidd.channels.matrix.identity.api import ApiError, MatrixApi
from squidd.channels.matrix.identity.cross_signing import (
    device_cross_signed,
    device_keys,
    fingerprint,
    public_identity,
)
from squidd.channels.matrix.identity.local import IdentityFiles
from squidd.channels.matrix.identity.secret_storage import SecretStorageError
from squidd.channels.matrix.identity.secret_storage import holds_keys as secret_storage_holds
from squidd.channels.matrix.state import MatrixFiles
from squidd.config import Settings
from squidd.errors import PermanentError, SquiddError
from squidd.secrets import secret_value

__all__ = [
    "ApiError",
    "Bootstrapped",
    "PasswordNeededError",
    "SecretStorageError",
    "bootstrap",
    "fingerprint",
    "identity_files",
    "identity_report",
    "request_trust",
    "restore",
]


@dataclass(frozen=True, slots=True)
class Bootstrapped:
    """The outcome of `bootstrap`: the master key, and the recovery key unless it was
    already shown (None then), and whether a new identity was made."""

    master: str
    recovery_key: str | None
    created: bool


def identity_files(settings: Settings) -> IdentityFiles:
    return IdentityFiles(settings.storage.data_dir)


async def _own(settings: Settings, password: str | None) -> tuple[MatrixApi, OwnIdentity]:
    cfg = settings.matrix
    files = MatrixFiles(settings.storage.data_dir)
    await files.prepare()
    creds = await resolve_credentials(cfg, files)
    api = MatrixApi(cfg.homeserver, creds.user_id, creds.access_token, timeout_s=30.0)
    password = password or secret_value(cfg.password) or None
    own = OwnIdentity(api, identity_files(settings), device_id=creds.device_id, password=password)
    return api, own


async def bootstrap(
    settings: Settings, *, reset: bool, ask_password: Callable[[], str | None]
) -> Bootstrapped:
    """Create the identity (or replace it with `reset`), or hand out the kept recovery key.

    `ask_password` is called once when the homeserver insists on the password and none is
    configured; PermanentError when the account has an identity whose keys are not here."""
    api, own = await _own(settings, None)
    async with api:
        files = identity_files(settings)
        async with files.lock():
            keys = await files.load_keys(api.user_id)
            published = public_identity(await api.query_keys([api.user_id]), api.user_id)
            if keys is not None and published is not None and not reset:
                if published.master != keys.master.public:
                    raise PermanentError(
                        "the account's identity on the homeserver is not the one in the data "
                        "dir: run `squidd matrix restore`, or `squidd matrix bootstrap --reset`"
                    )
                recovery = await files.take_recovery_key()
                return Bootstrapped(keys.master.public, recovery, created=False)
            if published is not None and keys is None and not reset:
                raise PermanentError(
                    f"the account already has an identity (master key "
                    f"{fingerprint(published.master)}) whose keys are not in the data dir: run "
                    "`squidd matrix restore` with its recovery key (or `squidd matrix "
                    "bootstrap --reset` to replace it; people then see an identity change)"
                )
            try:
                keys, recovery = await own.create(keep_recovery_key=False)
            except PasswordNeededError:
                password = ask_password()
                if not password:
                    raise
                own = OwnIdentity(api, files, device_id=own.device_id, password=password)
                keys, recovery = await own.create(keep_recovery_key=False)
            # A recovery key the daemon kept for an identity now replaced is worthless.
            await files.take_recovery_key()
        await own.sign_device()
        return Bootstrapped(keys.master.public, recovery, created=True)


async def request_trust(
    settings: Settings, user_id: str, master: str | None, socket: Path | None = None
) -> str:
    """Ask the daemon to accept `user_id`'s current identity (or exactly `master`) for the
    account of `settings`; `socket`: the daemon's status socket when the account's data dir
    is not the daemon's (an agent's own account).

    Returns "accepted" once a running daemon took the request, "waiting" if one runs but
    did not take it within its sync timeout, "queued" if none runs (taken at its start)."""
    from squidd.gateway.status import daemon_answers, socket_path

    files = identity_files(settings)
    path = await files.request_trust(user_id, master)
    if not await anyio.to_thread.run_sync(daemon_answers, socket or socket_path(settings)):
        return "queued"
    with anyio.move_on_after(settings.matrix.sync_timeout_s + 15):
        # Another process removes the file: no event to wait on, so look now and then.
        while await anyio.Path(path).exists():  # noqa: ASYNC110
            await anyio.sleep(0.2)
        return "accepted"
    return "waiting"


async def restore(settings: Settings, recovery_key: str) -> str:
    """Bring the account's identity back into the data dir; return its master key."""
    api, own = await _own(settings, None)
    async with api:
        keys = await own.restore(recovery_key)
        await own.sign_device()
    return keys.master.public


async def identity_report(settings: Settings) -> list[str]:
    """Lines for `config check`: the identity as the data dir and the homeserver show it.
    Uses the configured token or the kept login; never logs in (that would make a device)."""
    cfg = settings.matrix
    if not (cfg.enabled and cfg.e2ee):
        return []
    files = identity_files(settings)
    kept = await MatrixFiles(settings.storage.data_dir).load_credentials()
    token = secret_value(cfg.access_token) or (kept.access_token if kept else "")
    if not token:
        return ["not logged in yet: the first start creates the identity"]
    try:
        async with MatrixApi(cfg.homeserver, cfg.user_id, token, timeout_s=10.0) as api:
            who = await api.whoami("checking the token")
            user_id, device_id = api.user_id, who.get("device_id")
            query = await api.query_keys([user_id])
            stored = await secret_storage_holds(api)
    except (ApiError, SquiddError) as exc:
        return [f"cannot ask the homeserver: {exc}"]
    keys = await files.load_keys(user_id)
    published = public_identity(query, user_id)
    lines = [
        "master key: " + (fingerprint(published.master) if published else "(none yet)"),
        "private keys in the data dir: "
        + ("yes" if keys and published and keys.master.public == published.master else "NO"),
    ]
    signed = False
    if published is not None and isinstance(device_id, str):
        found = device_keys(query, user_id, device_id)
        signed = found is not None and device_cross_signed(published, found, device_id)
    lines.append(f"device {device_id} cross-signed: {'yes' if signed else 'NO'}")
    lines.append(f"secret storage holds the keys: {'yes' if stored else 'NO'}")
    if await files.has_recovery_key_file():
        lines.append("the recovery key is still in the data dir: run `squidd matrix bootstrap`")
    return lines
