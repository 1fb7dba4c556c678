"""The few client-server API calls cross-signing needs, which matrix-nio does not make.

nio parses `/keys/query` without the master and self-signing keys, and has no call for
`/keys/device_signing/upload`, `/keys/signatures/upload` or account data. These go over
aiohttp (nio's own transport) with the account's access token. Network trouble becomes
`TransientError`; a refusal becomes `ApiError` with the status and errcode (never the
token) so the caller can tell user-interactive auth (401 with `flows`) from the rest.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import aiohttp

from squidd.channels.matrix.errors import NETWORK_ERRORS, describe
from squidd.errors import PermanentError, TransientError

PREFIX = "/_matrix/client/v3"


class ApiError(Exception):
    """The homeserver refused a request: `status`, `errcode`, and the body it sent."""

    def __init__(self, action: str, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.errcode = str(body.get("errcode", ""))
        self.body = body
        error = str(body.get("error", ""))[:200]
        super().__init__(f"{action} refused by the homeserver: {status} {self.errcode} {error}")

    def squidd_error(self) -> Exception:
        """Permanent for a refused token or a 4xx that asks a person to act, else transient."""
        if self.errcode in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_FORBIDDEN"):
            return PermanentError(str(self))
        if self.status == 429 or self.status >= 500:
            return TransientError(str(self))
        return PermanentError(str(self))


class MatrixApi:
    """Authenticated JSON requests to one homeserver for one account."""

    def __init__(
        self, homeserver: str, user_id: str, access_token: str, *, timeout_s: float = 60.0
    ) -> None:
        self.homeserver = homeserver.rstrip("/")
        self.user_id = user_id
        self._token = access_token
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    async def __aenter__(self) -> MatrixApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def whoami(self, action: str) -> dict[str, Any]:
        """The token's account (`/account/whoami`), which this client then speaks for."""
        who = await self.request(action, "GET", "/account/whoami")
        self.user_id = str(who.get("user_id", ""))
        return who

    async def request(
        self, action: str, method: str, path: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The JSON answer of a 2xx; `ApiError` for a refusal, `TransientError` for the net.
        After `close` (a late call as the channel stops) the request gets a session of its
        own, closed with it: none is left open for the collector to find."""
        if self._closed:
            async with aiohttp.ClientSession(timeout=self._timeout) as once:
                return await self._request(once, action, method, path, body)
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return await self._request(self._session, action, method, path, body)

    async def _request(
        self,
        session: aiohttp.ClientSession,
        action: str,
        method: str,
        path: str,
        body: dict[str, Any] | None,
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            async with session.request(
                method, self.homeserver + PREFIX + path, json=body, headers=headers
            ) as response:
                text = await response.text()
                status = response.status
        except NETWORK_ERRORS as exc:
            raise TransientError(f"{action}: homeserver unreachable ({describe(exc)})") from exc
        try:
            data = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        if status >= 300:
            raise ApiError(action, status, data)
        return data

    # --- the calls ---------------------------------------------------------------------------

    async def query_keys(self, user_ids: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"device_keys": {user: [] for user in user_ids}}
        return await self.request("querying keys", "POST", "/keys/query", body)

    async def upload_cross_signing(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request(
            "uploading the cross-signing keys", "POST", "/keys/device_signing/upload", body
        )

    async def upload_signatures(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("uploading signatures", "POST", "/keys/signatures/upload", body)

    def _account_data_path(self, event_type: str) -> str:
        return f"/user/{quote(self.user_id, safe='')}/account_data/{quote(event_type, safe='')}"

    async def get_account_data(self, event_type: str) -> dict[str, Any] | None:
        """The content of one account data event, or None when the account has none."""
        try:
            return await self.request(
                "reading account data", "GET", self._account_data_path(event_type)
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def put_account_data(self, event_type: str, content: dict[str, Any]) -> None:
        await self.request(
            "writing account data", "PUT", self._account_data_path(event_type), content
        )

    async def send_notice(self, room_id: str, txn_id: str, text: str) -> None:
        """A plain-text `m.notice`, unencrypted even in an encrypted room (see trust)."""
        path = f"/rooms/{quote(room_id, safe='')}/send/m.room.message/{quote(txn_id, safe='')}"
        await self.request("sending a notice", "PUT", path, {"msgtype": "m.notice", "body": text})
