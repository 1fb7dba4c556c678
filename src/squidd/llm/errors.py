"""The LLM adapter's error table: every exception openai defines (and httpx2's, which reach
us raw while a stream is read) mapped to the `squidd.errors` type that says what to do.

`LLMUnavailableError`: try this model again after a backoff (429, 5xx, timeouts, a broken
stream); `LLMRejectedError`: this model will not serve the request, try the next one;
`LLMCredentialsError` and `LLMContextOverflowError`: no retry and no other model helps.
An entry of None is a defect, not the endpoint's doing: an exception raised only by parts
of the libraries squidd does not call (webhooks, realtime, `.parse()`, `raise_for_status`),
re-raised as it is so it reaches the turn's crash handling instead of a retry loop.
`tests/llm/test_errors.py` walks both libraries and fails on a class missing here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import httpx2
import openai
from openai import _exceptions as openai_exceptions

from squidd.errors import LLMError, LLMUnavailableError
from squidd.llm import causes, status

__all__ = ["CAUGHT", "TABLE", "translate"]

Translate = Callable[[Any, str], LLMError]
"""(the library's exception, the model asked) -> the squidd error."""


def _status(exc: openai.APIStatusError, model: str) -> LLMError:
    """A status error, worded as the chat request words the same answer (llm/status.py)."""
    kind = getattr(exc, "type", None)
    answer = status.ErrorAnswer(
        exc.status_code,
        exc.response.headers,
        exc.code,
        kind if isinstance(kind, str) else None,
        exc.message,
    )
    return status.error_of(answer, model)


def _connection(exc: openai.APIConnectionError, model: str) -> LLMError:
    # In words: the name not found, refused, TLS to a plain server and the reverse (causes.py).
    return LLMUnavailableError(causes.describe(exc))


def _timeout(exc: Exception, model: str) -> LLMError:
    return LLMUnavailableError(causes.describe(exc))


def _broken_response(exc: Exception, model: str) -> LLMError:
    return LLMUnavailableError(f"broken response ({type(exc).__name__})")


def _error_event(exc: Exception, model: str) -> LLMError:
    # An error event inside a 200 stream: proxies and routers report overload so.
    return LLMUnavailableError("broken stream (error event)")


def _unreadable(exc: Exception, model: str) -> LLMError:
    return LLMUnavailableError("broken stream (unreadable event)")


_OPENAI: dict[type[BaseException], Translate | None] = {
    openai.APIStatusError: _status,
    openai.BadRequestError: _status,
    openai.NotFoundError: _status,
    openai.ConflictError: _status,
    openai.UnprocessableEntityError: _status,
    openai.RateLimitError: _status,
    openai.InternalServerError: _status,
    openai.AuthenticationError: _status,
    openai.PermissionDeniedError: _status,
    openai.APIConnectionError: _connection,
    openai.APITimeoutError: _timeout,
    openai.APIResponseValidationError: _broken_response,
    openai.APIError: _error_event,
    # Raised by parts of the SDK squidd does not use (client set-up, `.parse()`, webhooks,
    # OAuth and workload identity, realtime websockets, the module-level client): a defect.
    openai.OpenAIError: None,
    openai.LengthFinishReasonError: None,
    openai.ContentFilterFinishReasonError: None,
    openai.InvalidWebhookSignatureError: None,
    openai.OAuthError: None,
    openai.WebSocketConnectionClosedError: None,
    openai.WebSocketQueueFullError: None,
    openai._AmbiguousModuleClientUsageError: None,
    openai_exceptions.SubjectTokenProviderError: None,
}

# While the stream is read, httpx2's own errors reach us unwrapped (openai wraps only those
# before the response): the network and the server's bytes are worth another attempt.
_HTTPX: dict[type[BaseException], Translate | None] = {
    **dict.fromkeys(
        (
            httpx2.HTTPError,
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
        ),
        _broken_response,
    ),
    # Misuse of the client or of a response (squidd sends no cookies, follows no redirects,
    # reads each response once, never calls raise_for_status): a defect.
    **dict.fromkeys(
        (
            httpx2.InvalidURL,
            httpx2.UnsupportedProtocol,
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

TABLE: Mapping[type[BaseException], Translate | None] = {
    **_OPENAI,
    **_HTTPX,
    json.JSONDecodeError: _unreadable,  # a garbled SSE event's data
}
"""Each exception class -> its translation, or None: a defect, re-raised unchanged."""

CAUGHT: tuple[type[BaseException], ...] = tuple(TABLE)
"""What the adapter catches at its edge; anything else is not the endpoint's doing."""


def translate(exc: BaseException, model: str) -> LLMError | None:
    """The squidd error for `exc` (by its nearest class in the table); None for a defect."""
    for cls in type(exc).__mro__:
        if cls in TABLE:
            translator = TABLE[cls]
            return None if translator is None else translator(exc, model)
    return None
