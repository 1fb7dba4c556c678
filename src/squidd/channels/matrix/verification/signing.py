"""What a verification needs of the bot's cross-signing identity (identity/), bound to it.

* our master key, MAC'd beside the device key so the person's client verifies the bot's
  identity, not only this device;
* the person's published master key (`/keys/query`), to check their MAC over it;
* on success, their master key signed with the bot's user-signing key and uploaded
  (`/keys/signatures/upload`): the person then shows as verified by the bot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from squidd.channels.matrix.identity.account import OwnIdentity
from squidd.channels.matrix.identity.api import ApiError, MatrixApi
from squidd.channels.matrix.identity.cross_signing import public_identity

log = structlog.get_logger()


class SigningIdentity:
    """`flows.Identity` over the bot's `OwnIdentity` and the account's API."""

    def __init__(self, api: MatrixApi, own: OwnIdentity) -> None:
        self._api = api
        self._own = own

    def own_master_key(self) -> str | None:
        keys = self._own.keys
        return keys.master.public if keys is not None else None

    async def _master_object(self, user_id: str) -> tuple[str, Mapping[str, Any]] | None:
        query = await self._api.query_keys([user_id])
        identity = public_identity(query, user_id)
        if identity is None:
            return None
        masters = query.get("master_keys")
        obj = masters.get(user_id) if isinstance(masters, Mapping) else None
        return (identity.master, obj) if isinstance(obj, Mapping) else None

    async def master_key_of(self, user_id: str) -> str | None:
        try:
            found = await self._master_object(user_id)
        except ApiError as exc:
            log.warning("matrix_verification_keys_query_failed", user=user_id, reason=str(exc))
            return None
        return found[0] if found else None

    async def verified(self, user_id: str, master_key: str) -> None:
        """Sign `master_key` of `user_id` with our user-signing key (if it is still theirs)."""
        keys = self._own.keys
        if keys is None:
            log.info("matrix_verification_not_signed", user=user_id, reason="no identity")
            return
        try:
            found = await self._master_object(user_id)
            if found is None or found[0] != master_key:
                log.warning("matrix_verification_not_signed", user=user_id, reason="key changed")
                return
            signed = keys.sign_master_key(self._api.user_id, found[1])
            answer = await self._api.upload_signatures({user_id: {master_key: signed}})
        except ApiError as exc:
            log.warning("matrix_verification_sign_failed", user=user_id, reason=str(exc))
            return
        if answer.get("failures"):
            log.warning("matrix_verification_sign_failed", user=user_id, reason="refused")
            return
        log.info("matrix_user_signed", user=user_id, master=master_key)
