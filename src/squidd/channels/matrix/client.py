"""Logging in, and translating matrix-nio's results into squidd's error types.

nio returns `ErrorResponse` objects for refusals, turned into `TransientError` (worth
retrying) or `PermanentError` (a human must act: a revoked token, a wrong password) here;
the exceptions it and aiohttp raise go through the adapter's table (`errors.py`).
A refused *send* is permanent when the homeserver said no for good (a 4xx such as
M_FORBIDDEN after the bot was kicked, M_TOO_LARGE); 429, 5xx and the network stay transient.

nio names its device-trust files after the raw user and device ids; `SafeStore` names
them with `safe_name` when the raw ids are no plain file name (`@../../etc:server` is a
user id Synapse accepts).

Key verification is squidd's own (`verification/`): `SquiddClient` keeps to-device
`m.key.verification.*` events from matrix-nio's Olm machine, whose SAS code asserts on
steps it did not expect (a MAC for a flow it never accepted raised `AssertionError` out of
`sync` and took the channel down) and queues answers of its own. The hook is the client's
`_handle_decrypt_to_device`, the one place nio hands a synced to-device event to the Olm
machine (`Olm.handle_to_device_event`, which dispatches verification events to
`handle_key_verification`): encrypted events still go through it to be decrypted; the
verification events skip it and reach squidd unchanged in the sync response's
`to_device_events`. Filtering the response before nio sees it is not possible (`sync`
parses and handles it in one call), and turning the Olm machine's method off on the
instance would hide the choice in a monkeypatch. nio handles no in-room verification
events (they are plain timeline events to it), so nothing is needed there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import anyio
import structlog
from nio import (
    AsyncClient,
    AsyncClientConfig,
    ErrorResponse,
    KeyVerificationEvent,
    LoginResponse,
    ToDeviceEvent,
    WhoamiResponse,
)
from nio.store import DefaultStore, MatrixStore
from nio.store.file_trustdb import KeyStore

from squidd.channels.matrix.errors import CAUGHT, call_error, describe
from squidd.channels.matrix.ids import RoomId
from squidd.channels.matrix.state import Credentials, MatrixFiles
from squidd.config.matrix import MatrixSettings
from squidd.errors import DeliveryError, PermanentError, TransientError
from squidd.secrets import secret_value

log = structlog.get_logger()

_PERMANENT_CODES = frozenset(
    {"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_USER_DEACTIVATED", "M_FORBIDDEN"}
)


# Refusals that say "not now" rather than "never", whatever the HTTP status.
_SEND_RETRY_CODES = frozenset({"M_LIMIT_EXCEEDED", "M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"})
_SEND_RETRY_STATUSES = frozenset({408, 425, 429})


class TokenRejectedError(PermanentError):
    """The homeserver does not accept the access token (revoked, logged out, expired)."""


def translate(action: str, response: ErrorResponse, *, login: bool = False) -> Exception:
    """An exception for a refused request; the server's message carries no secret."""
    code = response.status_code or "unknown"
    message = f"{action} refused by the homeserver: {code} {response.message or ''}".strip()
    if code in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"):
        return TokenRejectedError(message)
    if code in _PERMANENT_CODES and (login or code != "M_FORBIDDEN"):
        return PermanentError(message)
    return TransientError(message)


def send_refusal(room_id: RoomId, response: ErrorResponse) -> PermanentError | DeliveryError:
    """The error for a refused send: permanent for a 4xx refusal, else worth a retry.

    A rejected token is left to the sync loop, which fails the channel; the reply waits.
    """
    code = response.status_code or "unknown"
    transport = getattr(response, "transport_response", None)
    status = getattr(transport, "status", None)
    message = f"sending to {room_id} refused by the homeserver: {code} {response.message or ''}"
    if code in _SEND_RETRY_CODES or not isinstance(status, int):
        return DeliveryError(message.strip())
    if 400 <= status < 500 and status not in _SEND_RETRY_STATUSES:
        return PermanentError(message.strip())
    return DeliveryError(message.strip())


async def call(action: str, awaitable: Any) -> Any:
    """Await a nio request; its exceptions are translated by the adapter's table (a homeserver
    out of reach: `TransientError`), nio's own refusals and defects leave unchanged."""
    try:
        return await awaitable
    except CAUGHT as exc:
        error = call_error(action, exc)
        if error is None:
            raise
        raise error from exc


@dataclass
class SafeStore(DefaultStore):  # type: ignore[misc]  # nio is untyped
    """nio's default store with trust files that cannot be steered out of the store dir."""

    def __post_init__(self) -> None:
        MatrixStore.__post_init__(self)
        base = MatrixFiles.trust_name(self.user_id, self.device_id)
        path = os.path.join(self.store_path, base)
        self.trust_db = KeyStore(f"{path}.trusted_devices")
        self.blacklist_db = KeyStore(f"{path}.blacklisted_devices")
        self.ignore_db = KeyStore(f"{path}.ignored_devices")


class _ClosedSession:
    """Stands for the HTTP session once the client is closed. nio makes a new session for
    any call that finds none, so a late call (a task still ending as its channel stops)
    would open one nobody closes; this one is never empty and refuses every request."""

    def __bool__(self) -> bool:
        return True

    async def close(self) -> None:
        return None

    def request(self, *args: Any, **kwargs: Any) -> Any:
        raise DeliveryError("matrix is not connected (the connection was closed)")


class SquiddClient(AsyncClient):  # type: ignore[misc]  # nio is untyped
    """nio's client without nio's key verification (see the module's docstring), and with
    no HTTP session made again after `close`."""

    _session: Any = None

    @property
    def client_session(self) -> Any:
        return self._session

    @client_session.setter
    def client_session(self, value: Any) -> None:
        self._session = value

    async def close(self) -> None:
        await super().close()
        self._session = _ClosedSession()

    def _handle_decrypt_to_device(self, to_device_event: ToDeviceEvent) -> ToDeviceEvent | None:
        if isinstance(to_device_event, KeyVerificationEvent):
            return None  # squidd's verification/ reads it from the sync response
        decrypted: ToDeviceEvent | None = super()._handle_decrypt_to_device(to_device_event)
        return decrypted


def client_config(settings: MatrixSettings, store_name: str = "") -> AsyncClientConfig:
    return AsyncClientConfig(
        store=SafeStore,
        encryption_enabled=settings.e2ee and bool(store_name),
        store_sync_tokens=False,  # the position is ours to persist, after the acks
        store_name=store_name,
        max_timeouts=0,  # network errors surface at once; our loop does the backoff
        max_limit_exceeded=None,
        request_timeout=settings.request_timeout_s,
    )


def _probe_client(settings: MatrixSettings) -> AsyncClient:
    return AsyncClient(settings.homeserver, settings.user_id, config=client_config(settings))


async def _whoami(settings: MatrixSettings, token: str) -> WhoamiResponse:
    probe = _probe_client(settings)
    probe.access_token = token
    try:
        response = await call("whoami", probe.whoami())
    finally:
        with anyio.CancelScope(shield=True):
            await probe.close()
    if isinstance(response, ErrorResponse):
        raise translate("checking the access token", response)
    return response


async def _password_login(settings: MatrixSettings, password: str) -> Credentials:
    probe = _probe_client(settings)
    try:
        response = await call(
            "login", probe.login(password=password, device_name=settings.device_name)
        )
    finally:
        with anyio.CancelScope(shield=True):
            await probe.close()
    if isinstance(response, ErrorResponse):
        raise translate("password login", response, login=True)
    if not isinstance(response, LoginResponse):
        raise TransientError(f"login: unexpected answer {type(response).__name__}")
    log.info("matrix_logged_in", user=response.user_id, device=response.device_id)
    return Credentials(
        homeserver=settings.homeserver,
        user_id=response.user_id,
        device_id=response.device_id,
        access_token=response.access_token,
    )


async def resolve_credentials(settings: MatrixSettings, files: MatrixFiles) -> Credentials:
    """Who we are: from the configured token, else the kept login, else a password login."""
    token = secret_value(settings.access_token)
    if token:
        who = await _whoami(settings, token)
        if settings.user_id and who.user_id != settings.user_id:
            raise PermanentError(
                f"the access token belongs to {who.user_id}, not to matrix.user_id "
                f"{settings.user_id}"
            )
        if not who.device_id:
            raise PermanentError(
                "the access token has no device id; create one by logging in (see docs/matrix.md)"
            )
        return Credentials(settings.homeserver, who.user_id, who.device_id, token)

    password = secret_value(settings.password)
    if not password:
        raise PermanentError("matrix: neither access_token nor password is configured")
    kept = await files.load_credentials()
    if kept is not None and (
        kept.homeserver != settings.homeserver or kept.user_id != settings.user_id
    ):
        log.info("matrix_kept_login_for_other_account_ignored")
        kept = None
    if kept is not None:
        try:
            who = await _whoami(settings, kept.access_token)
        except TokenRejectedError:
            log.warning("matrix_kept_token_rejected", action="logging in again")
            await files.forget_credentials()
        else:
            if who.user_id == kept.user_id:
                return kept
            await files.forget_credentials()
    creds = await _password_login(settings, password)
    await files.save_credentials(creds)
    return creds


async def open_client(settings: MatrixSettings, files: MatrixFiles) -> AsyncClient:
    """A logged-in client with its encryption store loaded (when e2ee is on)."""
    creds = await resolve_credentials(settings, files)
    store_name = MatrixFiles.store_name(creds.user_id, creds.device_id) if settings.e2ee else ""
    client = SquiddClient(
        settings.homeserver,
        creds.user_id,
        device_id=creds.device_id,
        store_path=str(files.store_dir),
        config=client_config(settings, store_name),
    )
    try:
        # Loads (or creates) the Olm account from the SQLite store: a short local read.
        client.restore_login(creds.user_id, creds.device_id, creds.access_token)
    except Exception as exc:
        with anyio.CancelScope(shield=True):
            await client.close()
        raise PermanentError(
            f"cannot open the encryption store in {files.store_dir}: {describe(exc)}"
        ) from exc
    return client
