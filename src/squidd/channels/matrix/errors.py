"""The Matrix adapter's error table: every exception matrix-nio defines, and aiohttp's under
it, sorted by what squidd does about it. A class missing here fails
`tests/channels/matrix/test_errors.py`.

- `UNREACHABLE`: the homeserver did not answer, dropped the connection or sent bytes that are
  no answer (a proxy's error page, a cut body, a certificate that does not verify: a renewed
  certificate fixes that one). A `TransientError` (`DeliveryError` for a reply); the loops
  retry with backoff. The builtin `ConnectionError` and `TimeoutError` are here because
  sockets and timeouts raise them unwrapped; a bare `OSError` is not: a file of the store
  that cannot be written is no network trouble and must not hide as one.
- `BAD_ADDRESS`: the homeserver address is no URL a retry could reach: a `PermanentError`.
- `REFUSED`: nio refuses the request itself (no such room, not encrypted, a device not yet
  trusted, the room key not shared): a reply waits and is tried again (`DeliveryError`);
  elsewhere the caller gets nio's own exception, as before.
- `DEFECT`: raised only by parts squidd does not use (nio's own SAS, squidd has its own in
  `verification/`; transfers cancelled by hand, websockets, aiohttp internals): re-raised
  unchanged, so it reaches the supervisor or the poison parking instead of a retry loop.

Refusals the homeserver *answers* (nio's `ErrorResponse`) are no exceptions: `client.py`
translates those.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import aiohttp
import nio

from squidd.channels.matrix.ids import RoomId
from squidd.errors import DeliveryError, PermanentError, SquiddError, TransientError

__all__ = ["CAUGHT", "NETWORK_ERRORS", "TABLE", "Fault", "call_error", "describe", "send_error"]


class Fault(enum.Enum):
    UNREACHABLE = "unreachable"
    BAD_ADDRESS = "bad address"
    REFUSED = "refused by nio"
    DEFECT = "defect"


_AIOHTTP: dict[type[BaseException], Fault] = {
    **dict.fromkeys(
        (
            aiohttp.ClientError,
            aiohttp.ClientConnectionError,
            aiohttp.ClientConnectionResetError,
            aiohttp.ClientConnectorError,
            aiohttp.ClientConnectorDNSError,
            aiohttp.ClientConnectorSSLError,
            aiohttp.ClientConnectorCertificateError,
            aiohttp.ClientSSLError,
            aiohttp.ClientOSError,
            aiohttp.ClientProxyConnectionError,
            aiohttp.ClientHttpProxyError,
            aiohttp.ClientPayloadError,
            aiohttp.ClientResponseError,
            aiohttp.ContentTypeError,
            aiohttp.ServerConnectionError,
            aiohttp.ServerDisconnectedError,
            aiohttp.ServerTimeoutError,
            aiohttp.ServerFingerprintMismatch,
            aiohttp.ConnectionTimeoutError,
            aiohttp.SocketTimeoutError,
            aiohttp.RedirectClientError,
            aiohttp.TooManyRedirects,
            aiohttp.UploadAbortedError,
        ),
        Fault.UNREACHABLE,
    ),
    **dict.fromkeys(
        (
            aiohttp.InvalidURL,
            aiohttp.InvalidUrlClientError,
            aiohttp.InvalidUrlRedirectClientError,
            aiohttp.NonHttpUrlClientError,
            aiohttp.NonHttpUrlRedirectClientError,
        ),
        Fault.BAD_ADDRESS,
    ),
    **dict.fromkeys(
        (
            aiohttp.WebSocketError,
            aiohttp.WSServerHandshakeError,
            aiohttp.WSMessageTypeError,
            aiohttp.EofStream,
            aiohttp.BadContentDispositionHeader,
            aiohttp.BadContentDispositionParam,
        ),
        Fault.DEFECT,
    ),
}

_NIO: dict[type[BaseException], Fault] = {
    # The transport and protocol errors of nio's own HTTP layer: the server's side.
    nio.RemoteProtocolError: Fault.UNREACHABLE,
    nio.RemoteTransportError: Fault.UNREACHABLE,
    nio.LocalTransportError: Fault.UNREACHABLE,
    **dict.fromkeys(
        (
            nio.LocalProtocolError,
            nio.MembersSyncError,
            nio.SendRetryError,
            nio.OlmTrustError,
            nio.OlmUnverifiedDeviceError,
            nio.EncryptionError,
            nio.GroupEncryptionError,
        ),
        Fault.REFUSED,
    ),
    **dict.fromkeys(
        (
            nio.ProtocolError,
            nio.VerificationError,
            nio.TransferCancelledError,
            # nio validates answers against its schemas and turns a mismatch into an
            # ErrorResponse; these escaping would be nio's bug.
            nio.SchemaError,  # jsonschema's, as nio exports them
            nio.ValidationError,
        ),
        Fault.DEFECT,
    ),
}

TABLE: Mapping[type[BaseException], Fault] = {
    **_AIOHTTP,
    **_NIO,
    ConnectionError: Fault.UNREACHABLE,
    TimeoutError: Fault.UNREACHABLE,
}
"""Each exception class -> what it means for squidd."""

CAUGHT: tuple[type[BaseException], ...] = tuple(TABLE)
"""What the adapter catches around a nio call; anything else is no Matrix trouble."""

NETWORK_ERRORS: tuple[type[BaseException], ...] = tuple(
    cls for cls, fault in TABLE.items() if fault is Fault.UNREACHABLE
)
"""The classes of a homeserver that cannot be reached (for clean-up on exactly those)."""


def fault_of(exc: BaseException) -> Fault:
    """The fault of `exc` by its nearest class in the table; DEFECT when none is there."""
    for cls in type(exc).__mro__:
        if cls in TABLE:
            return TABLE[cls]
    return Fault.DEFECT


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def call_error(action: str, exc: BaseException) -> SquiddError | None:
    """The error for a failed request other than a reply; None: re-raise `exc` as it is."""
    fault = fault_of(exc)
    if fault is Fault.UNREACHABLE:
        return TransientError(f"{action}: homeserver unreachable ({describe(exc)})")
    if fault is Fault.BAD_ADDRESS:
        return PermanentError(f"{action}: the homeserver address is no usable URL")
    return None


def send_error(room_id: RoomId, exc: BaseException) -> DeliveryError | None:
    """The error for a reply that failed with `exc`; None: re-raise it (a defect)."""
    fault = fault_of(exc)
    if fault is Fault.UNREACHABLE:
        return DeliveryError(f"homeserver unreachable ({describe(exc)})")
    if fault in (Fault.REFUSED, Fault.BAD_ADDRESS):
        return DeliveryError(f"cannot send to {room_id}: {describe(exc)}")
    return None
