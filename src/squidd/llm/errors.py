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
import re
from collections.abc import Callable, Mapping
from typing import Any

import httpx2
import openai
from openai import _exceptions as openai_exceptions

from squidd.errors import (
    LLMContextOverflowError,
    LLMCredentialsError,
    LLMError,
    LLMRateLimitedError,
    LLMRejectedError,
    LLMUnavailableError,
)
from squidd.llm import causes

__all__ = ["CAUGHT", "TABLE", "translate"]

Translate = Callable[[Any, str], LLMError]
"""(the library's exception, the model asked) -> the squidd error."""

_RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_NEXT_MODEL_STATUSES = frozenset({400, 404, 422})
_OVERFLOW_HINTS = ("context_length_exceeded", "maximum context length", "context length")


def _is_context_overflow(exc: openai.APIStatusError) -> bool:
    if exc.status_code not in (400, 413, 422):
        return False
    text = f"{exc.code or ''} {exc.message}".lower()
    return any(hint in text for hint in _OVERFLOW_HINTS)


def _seconds(value: str) -> float | None:
    """A wait as servers write it: "7", "0.5", or OpenAI's reset form "1m30s" / "250ms"."""
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(number) * scale[unit] for number, unit in parts)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """The wait the server named: `Retry-After` (seconds; a date is not honoured),
    `retry-after-ms`, else the later of the rate-limit resets (`x-ratelimit-reset-*`)."""
    headers = exc.response.headers
    if (value := headers.get("retry-after-ms")) is not None:
        millis = _seconds(value)
        if millis is not None:
            return millis / 1000
    if (value := headers.get("retry-after")) is not None:
        return _seconds(value)
    resets = [
        wait
        for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
        if (value := headers.get(name)) is not None and (wait := _seconds(value)) is not None
    ]
    return max(resets) if resets else None


def _is_quota(exc: openai.APIStatusError) -> bool:
    text = f"{exc.code or ''} {getattr(exc, 'type', '') or ''} {exc.message}".lower()
    return "insufficient_quota" in text or "quota" in text


def _status(exc: openai.APIStatusError, model: str) -> LLMError:
    status = exc.status_code
    if _is_context_overflow(exc):
        # No retry and no fallback model helps: the caller must send less.
        return LLMContextOverflowError(f"the request is longer than model {model}'s context window")
    if status == 429:
        quota = _is_quota(exc)
        reason = "quota exhausted (HTTP 429)" if quota else "rate limited (HTTP 429)"
        return LLMRateLimitedError(reason, retry_after_s=_retry_after(exc), quota=quota)
    if status in _RETRY_STATUSES or status >= 500:
        return LLMUnavailableError(f"HTTP {status}", retry_after_s=_retry_after(exc))
    if status in _NEXT_MODEL_STATUSES:
        return LLMRejectedError(f"rejected by model {model} (HTTP {status})")
    return LLMRejectedError(f"rejected (HTTP {status})")


def _credentials(exc: openai.APIStatusError, model: str) -> LLMError:
    return LLMCredentialsError(
        f"the model endpoint rejected the credentials (HTTP {exc.status_code})"
    )


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
    openai.AuthenticationError: _credentials,
    openai.PermissionDeniedError: _credentials,
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
