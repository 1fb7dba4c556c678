"""Checking the bot account from outside the daemon (`squidd doctor`), over the HTTP API only.

Never matrix-nio's device or crypto store: a second process opening it beside the running
daemon corrupts Olm sessions. `MatrixProbe` uses the configured access token, else the
login the daemon keeps (`matrix/credentials.json`); with neither it logs in with the
password and logs that session out again at `close`, so no device is left behind. Each
step raises the channel's error types: `TransientError` for an unreachable homeserver,
`ApiError` (identity/api.py) for a refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from squidd.channels.matrix.errors import NETWORK_ERRORS, describe
from squidd.channels.matrix.identity.api import ApiError, MatrixApi
from squidd.channels.matrix.identity.cross_signing import (
    device_cross_signed,
    device_keys,
    fingerprint,
    public_identity,
)
from squidd.channels.matrix.identity.local import IdentityFiles
from squidd.channels.matrix.state import MatrixFiles
from squidd.config.matrix import MatrixSettings
from squidd.errors import PermanentError, TransientError
from squidd.secrets import secret_value

__all__ = ["CrossSigning", "MatrixProbe"]

# An initial sync that carries no rooms, presence or account data: it only shows the
# endpoint answers for this token.
_EMPTY_FILTER = '{"room":{"rooms":[]},"presence":{"types":[]},"account_data":{"types":[]}}'


@dataclass(frozen=True, slots=True)
class CrossSigning:
    """The account's identity as published, and what the data dir holds of it."""

    master: str | None
    keys_here: bool
    device_signed: bool

    def problem(self) -> str | None:
        if self.master is None:
            return "the account has no cross-signing identity: run `squidd matrix bootstrap`"
        if not self.keys_here:
            return (
                "the identity's keys are not in the data dir: run `squidd matrix restore` "
                "with its recovery key"
            )
        if not self.device_signed:
            return "the daemon's device is not signed by the identity: restart `squidd run`"
        return None


class MatrixProbe:
    """One check session against the homeserver; `close` it."""

    def __init__(self, settings: MatrixSettings, data_dir: Path) -> None:
        self._settings = settings
        self._files = MatrixFiles(data_dir)
        self._identity = IdentityFiles(data_dir)
        self._api: MatrixApi | None = None
        self._own_login = False
        self.daemon_device: str | None = None
        """The daemon's device id (from the configured token or its kept login)."""

    @property
    def api(self) -> MatrixApi:
        if self._api is None:
            raise RuntimeError("log in first")
        return self._api

    async def login(self) -> str:
        """Who the account is: checks the token (or the password); returns the user id."""
        cfg = self._settings
        token = secret_value(cfg.access_token)
        kept = None if token else await self._files.load_credentials()
        if kept is not None and kept.user_id == cfg.user_id:
            token = kept.access_token
        if token:
            api = MatrixApi(cfg.homeserver, cfg.user_id, token, timeout_s=cfg.request_timeout_s)
            self._api = api
            who = await api.request("checking the access token", "GET", "/account/whoami")
            device = who.get("device_id")
            self.daemon_device = device if isinstance(device, str) else None
            return str(who.get("user_id", cfg.user_id))
        password = secret_value(cfg.password)
        if not password:
            raise PermanentError("matrix: neither access_token nor password is configured")
        token = await self._password_login(password)
        self._api = MatrixApi(cfg.homeserver, cfg.user_id, token, timeout_s=cfg.request_timeout_s)
        self._own_login = True
        return cfg.user_id

    async def _password_login(self, password: str) -> str:
        cfg = self._settings
        body = {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": cfg.user_id},
            "password": password,
            "initial_device_display_name": "squidd doctor",
        }
        timeout = aiohttp.ClientTimeout(total=cfg.request_timeout_s)
        url = cfg.homeserver.rstrip("/") + "/_matrix/client/v3/login"
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(url, json=body) as response,
            ):
                data = await response.json(content_type=None)
                status = response.status
        except NETWORK_ERRORS as exc:
            raise TransientError(f"login: homeserver unreachable ({describe(exc)})") from exc
        if status >= 300 or not isinstance(data, dict) or "access_token" not in data:
            raise ApiError("password login", status, data if isinstance(data, dict) else {})
        return str(data["access_token"])

    async def sync(self) -> None:
        path = f"/sync?timeout=0&filter={quote(_EMPTY_FILTER, safe='')}"
        await self.api.request("syncing", "GET", path)

    async def joined_rooms(self) -> int:
        data = await self.api.request("listing joined rooms", "GET", "/joined_rooms")
        rooms = data.get("joined_rooms")
        return len(rooms) if isinstance(rooms, list) else 0

    async def _own_keys(self) -> dict[str, Any]:
        return await self.api.query_keys([self.api.user_id])

    async def device_keys_published(self) -> bool | None:
        """Whether the daemon's device published its keys; None when it has no device yet."""
        if self.daemon_device is None:
            return None
        return device_keys(await self._own_keys(), self.api.user_id, self.daemon_device) is not None

    async def cross_signing(self) -> CrossSigning:
        query = await self._own_keys()
        user = self.api.user_id
        published = public_identity(query, user)
        kept = await self._identity.load_keys(user)
        if published is None:
            return CrossSigning(None, kept is not None, device_signed=False)
        here = kept is not None and kept.master.public == published.master
        keys = device_keys(query, user, self.daemon_device) if self.daemon_device else None
        signed = keys is not None and device_cross_signed(published, keys, self.daemon_device or "")
        return CrossSigning(fingerprint(published.master), here, signed)

    async def close(self) -> None:
        api, self._api = self._api, None
        if api is None:
            return
        try:
            if self._own_login:
                await api.request("logging out", "POST", "/logout", {})
        except (ApiError, TransientError):
            pass  # the check is over either way; a leftover session expires with its token
        finally:
            await api.close()
