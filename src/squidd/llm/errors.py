"""The LLM adapter's error table: every exception httpx2 defines (and the two a TLS or
socket failure raises under it) mapped to the `squidd.errors` type that says what to do.

A network failure or a timeout, before the answer or while it streams, is
`LLMUnavailableError` worded by llm/causes.py (the name not found, refused, TLS spoken to a
plain server and the reverse, which timeout): try this model again after a backoff. An
entry of None is a defect, not the endpoint's doing (a misused client or response: squidd
sends no cookies, reads each response once, never calls `raise_for_status`), re-raised as
it is so it reaches the turn's crash handling instead of a retry loop. What the endpoint
answers (a status, an error event) is worded elsewhere: llm/status.py and llm/openai.py.
`tests/llm/test_errors.py` walks httpx2 and fails on a class missing here.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping

import anyio
import httpx2

from squidd.errors import LLMError, LLMUnavailableError
from squidd.llm import causes

__all__ = ["CAUGHT", "TABLE", "translate"]

Translate = Callable[[BaseException], LLMError]
"""The library's exception -> the squidd error."""


def _network(exc: BaseException) -> LLMError:
    return LLMUnavailableError(causes.describe(exc))


TABLE: Mapping[type[BaseException], Translate | None] = {
    **dict.fromkeys(
        (
            httpx2.RequestError,
            httpx2.TransportError,
            httpx2.TimeoutException,
            httpx2.ConnectTimeout,
            httpx2.ReadTimeout,
            httpx2.WriteTimeout,
            httpx2.PoolTimeout,
            httpx2.NetworkError,
            httpx2.ConnectError,
            httpx2.ReadError,
            httpx2.WriteError,
            httpx2.CloseError,
            httpx2.ProtocolError,
            httpx2.LocalProtocolError,
            httpx2.RemoteProtocolError,
            httpx2.ProxyError,
            httpx2.DecodingError,
            httpx2.SSEError,
            httpx2.UnsupportedProtocol,  # a base URL with a scheme nobody speaks
            # What anyio's TLS stream raises unmapped under httpcore2 (the SDK treated both
            # as a connection failure too).
            ssl.SSLError,
            anyio.EndOfStream,
        ),
        _network,
    ),
    **dict.fromkeys(
        (
            httpx2.HTTPError,  # a subclass not listed here is no network failure
            httpx2.InvalidURL,
            httpx2.TooManyRedirects,
            httpx2.HTTPStatusError,
            httpx2.CookieConflict,
            httpx2.StreamError,
            httpx2.StreamConsumed,
            httpx2.StreamClosed,
            httpx2.ResponseNotRead,
            httpx2.RequestNotRead,
        ),
        None,
    ),
}
"""Each exception class -> its translation, or None: a defect, re-raised unchanged."""

CAUGHT: tuple[type[BaseException], ...] = tuple(TABLE)
"""What the adapter catches at its edge; anything else is not the endpoint's doing."""


def translate(exc: BaseException) -> LLMError | None:
    """The squidd error for `exc` (by its nearest class in the table); None for a defect."""
    for cls in type(exc).__mro__:
        if cls in TABLE:
            translator = TABLE[cls]
            return None if translator is None else translator(exc)
    return None
