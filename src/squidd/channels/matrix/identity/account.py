"""The bot's own identity: kept the same across restarts, new devices and lost data dirs.

`ensure` runs when the channel connects (after nio uploaded the device's keys):
* no identity anywhere: create one (keys to the data dir first, then the upload, then secret
  storage), keep its recovery key in the data dir for `squidd matrix bootstrap` to show;
* ours locally and on the server: sign this device with the self-signing key if it is not
  yet (a new login or a lost device store gets a new device: same identity signs it), and
  put the keys into secret storage if they are not there;
* ours locally, none on the server (the upload never finished): upload again;
* one on the server whose keys are not here, or a different one: nothing is replaced; the
  status says what to run (`squidd matrix restore`, or `bootstrap --reset`).

The upload of cross-signing keys may need user-interactive auth: Synapse lets the first
upload (and a repeat of the same keys) through without it; replacing keys needs the
account password (`m.login.password`). With only an access token, `PasswordNeededError`
says what to run.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import structlog

from squidd.channels.matrix.identity import secret_storage
from squidd.channels.matrix.identity.api import ApiError, MatrixApi
from squidd.channels.matrix.identity.cross_signing import (
    CrossSigningKeys,
    PublicIdentity,
    device_cross_signed,
    device_keys,
    fingerprint,
    public_identity,
)
from squidd.channels.matrix.identity.local import IdentityFiles
from squidd.errors import PermanentError

log = structlog.get_logger()

UIA_HINT = (
    "the homeserver asks for the account password to upload the cross-signing keys, and "
    "only an access token is configured: run `squidd matrix bootstrap`, which asks "
    "for the password once"
)


class PasswordNeededError(PermanentError):
    """The server insists on user-interactive auth and we have no password to answer it."""


@dataclass(frozen=True, slots=True)
class IdentityStatus:
    """What `squidd status` and `config check` show about the bot's identity."""

    master: str | None
    device_cross_signed: bool
    secret_storage: bool
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "master_key": fingerprint(self.master) if self.master else None,
            "device_cross_signed": self.device_cross_signed,
            "secret_storage": self.secret_storage,
            "problem": self.problem,
        }


class OwnIdentity:
    """One account's cross-signing identity, for one of its devices."""

    def __init__(
        self,
        api: MatrixApi,
        files: IdentityFiles,
        *,
        device_id: str | None,
        password: str | None,
    ) -> None:
        self._api = api
        self._files = files
        self._user_id = api.user_id
        self.device_id = device_id
        self._password = password
        self.keys: CrossSigningKeys | None = None

    async def _published(self) -> tuple[PublicIdentity | None, dict[str, Any]]:
        query = await self._api.query_keys([self._user_id])
        return public_identity(query, self._user_id), query

    async def ensure(self) -> IdentityStatus:
        """Make this device cross-signed by the account's one identity (see the module)."""
        async with self._files.lock():
            keys = await self._files.load_keys(self._user_id)
            published, query = await self._published()
            if keys is None and published is None:
                keys, _ = await self.create(keep_recovery_key=True)
                published, query = await self._published()
            elif keys is None and published is not None:
                return self._refuse(
                    published.master,
                    "the account has a cross-signing identity whose private keys are not in "
                    "the data dir: run `squidd matrix restore` with its recovery key",
                )
            elif keys is None:
                raise AssertionError("unreachable")  # pragma: no cover
            elif published is None:
                log.info("matrix_identity_upload_repeated", master=keys.master.public)
                await self._upload(keys)
                published, query = await self._published()
            elif published.master != keys.master.public:
                return self._refuse(
                    published.master,
                    "the account's identity on the homeserver is not the one in the data dir "
                    "(reset elsewhere?): run `squidd matrix restore` with its recovery key, "
                    "or `squidd matrix bootstrap --reset` to replace it",
                )
            self.keys = keys
            stored = await secret_storage.holds_keys(self._api)
            if not stored:
                await self._store_secrets(keys, keep_recovery_key=True)
                stored = True
        signed = await self.sign_device(query)
        return IdentityStatus(keys.master.public, signed, stored)

    def _refuse(self, master: str, problem: str) -> IdentityStatus:
        log.warning("matrix_identity_not_usable", master=master, problem=problem)
        return IdentityStatus(master, False, False, problem)

    async def create(self, *, keep_recovery_key: bool) -> tuple[CrossSigningKeys, str]:
        """A new identity, uploaded and in secret storage; returns it and its recovery key.
        Replacing a published identity needs the password (user-interactive auth)."""
        keys = CrossSigningKeys.generate()
        previous = await self._files.load_keys(self._user_id)
        # On disk before the upload: a crash in between leaves keys we can upload again,
        # never an identity on the server that nobody holds the keys of.
        await self._files.save_keys(self._user_id, keys)
        try:
            await self._upload(keys)
        except BaseException:
            # Refused (a reset without the password): the data dir keeps what the server has.
            await self._files.put_back(self._user_id, previous)
            raise
        recovery_key = await self._store_secrets(keys, keep_recovery_key=keep_recovery_key)
        self.keys = keys
        log.info(
            "matrix_identity_created", user=self._user_id, master=fingerprint(keys.master.public)
        )
        return keys, recovery_key

    async def _store_secrets(self, keys: CrossSigningKeys, *, keep_recovery_key: bool) -> str:
        storage_key = secrets.token_bytes(secret_storage.KEY_BYTES)
        recovery_key = secret_storage.encode_recovery_key(storage_key)
        if keep_recovery_key:
            # Kept before it is used: the keys are never stored under a key nobody has.
            await self._files.save_recovery_key(recovery_key)
            log.warning(
                "matrix_recovery_key_kept",
                path=str(self._files.recovery_path),
                action="run `squidd matrix bootstrap` to see it once and keep it safe",
            )
        await secret_storage.store_keys(self._api, storage_key, keys)
        return recovery_key

    async def _upload(self, keys: CrossSigningKeys) -> None:
        body = keys.upload_body(self._user_id)
        try:
            await self._api.upload_cross_signing(body)
        except ApiError as exc:
            flows = exc.body.get("flows")
            if exc.status != 401 or not isinstance(flows, list):
                raise exc.squidd_error() from None
            session = exc.body.get("session")
            offered = any(
                isinstance(f, dict) and f.get("stages") == ["m.login.password"] for f in flows
            )
        else:
            return
        if not offered:
            raise PermanentError(
                "the homeserver asks for an authentication squidd cannot give to upload the "
                "cross-signing keys (no password flow); set them up from a client instead"
            )
        if not self._password:
            raise PasswordNeededError(UIA_HINT)
        body["auth"] = {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": self._user_id},
            "password": self._password,
            "session": session,
        }
        try:
            await self._api.upload_cross_signing(body)
        except ApiError as exc:
            raise PermanentError(
                f"uploading the cross-signing keys with the password: {exc.status} {exc.errcode}"
            ) from None

    async def sign_device(self, query: dict[str, Any] | None = None) -> bool:
        """Sign this device with the self-signing key unless it is already; True if signed."""
        keys = self.keys
        if keys is None or self.device_id is None:
            return False
        if query is None:
            query = await self._api.query_keys([self._user_id])
        found = device_keys(query, self._user_id, self.device_id)
        if found is None:
            log.warning("matrix_device_keys_not_published", device=self.device_id)
            return False
        ours = PublicIdentity(self._user_id, keys.master.public, keys.self_signing.public)
        if device_cross_signed(ours, found, self.device_id):
            return True
        body = {self._user_id: {self.device_id: keys.sign_device(self._user_id, found)}}
        answer = await self._api.upload_signatures(body)
        if answer.get("failures"):
            log.warning("matrix_device_signature_refused", failures=answer["failures"])
            return False
        log.info("matrix_device_cross_signed", device=self.device_id)
        return True

    async def restore(self, recovery_key: str) -> CrossSigningKeys:
        """Bring the published identity's keys back from secret storage into the data dir."""
        storage_key = secret_storage.decode_recovery_key(recovery_key)
        keys = await secret_storage.load_keys(self._api, storage_key)
        published, _ = await self._published()
        if published is None or published.master != keys.master.public:
            raise secret_storage.SecretStorageError(
                "the keys in secret storage are not the account's published identity"
            )
        async with self._files.lock():
            await self._files.save_keys(self._user_id, keys)
        self.keys = keys
        log.info("matrix_identity_restored", master=fingerprint(keys.master.public))
        return keys
