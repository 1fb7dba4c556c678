"""An error answer of an OpenAI-compatible endpoint (its HTTP status, its headers and the
`error` object of its body) as the `squidd.errors` type that says what to do next.

`LLMUnavailableError`: try this model again after a backoff (429, 5xx, 408, 409, 425);
`LLMRejectedError`: this model will not serve the request, try the next one;
`LLMCredentialsError` (401, 403) and `LLMContextOverflowError` (a 400, 413 or 422 that
says the context is too long): no retry and no other model helps. A 429 carries the wait
the server named and whether the account's quota, not a rate, ran out.

The chat request (llm/openai.py) and the model list (llm/probe.py) read their error answers
here, so both word a failure the same way; the message is built as OpenAI's SDK built it,
so what the context-overflow and quota hints look for is where it was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from squidd.errors import (
    LLMContextOverflowError,
    LLMCredentialsError,
    LLMError,
    LLMRateLimitedError,
    LLMRejectedError,
    LLMUnavailableError,
)

__all__ = ["ErrorAnswer", "error_of"]

_RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_NEXT_MODEL_STATUSES = frozenset({400, 404, 422})
_OVERFLOW_HINTS = ("context_length_exceeded", "maximum context length", "context length")


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """What an error answer says: the status, the headers, the error's `code`, `type` and
    message (`Error code: <status> - <the error's message>`, as OpenAI's SDK words it)."""

    status: int
    headers: Mapping[str, str]
    code: str | None
    type: str | None
    message: str

    @classmethod
    def parse(cls, status: int, headers: Mapping[str, str], text: str) -> ErrorAnswer:
        """The answer from its raw body: OpenAI's `{"error": {...}}`, a bare error object,
        or anything else (kept out of the message: it may be a whole HTML page)."""
        message = f"Error code: {status}"
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        error = body.get("error", body) if isinstance(body, dict) else None
        if not isinstance(error, dict):
            return cls(status, headers, None, None, message)
        said = error.get("message")
        if isinstance(said, str) and said:
            message += f" - {said}"
        code, kind = error.get("code"), error.get("type")
        return cls(
            status,
            headers,
            None if code is None else str(code),
            kind if isinstance(kind, str) else None,
            message,
        )


def _is_context_overflow(answer: ErrorAnswer) -> bool:
    if answer.status not in (400, 413, 422):
        return False
    text = f"{answer.code or ''} {answer.message}".lower()
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


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait the server named: `Retry-After` (seconds; a date is not honoured),
    `retry-after-ms`, else the later of the rate-limit resets (`x-ratelimit-reset-*`)."""
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


def _is_quota(answer: ErrorAnswer) -> bool:
    text = f"{answer.code or ''} {answer.type or ''} {answer.message}".lower()
    return "insufficient_quota" in text or "quota" in text


def error_of(answer: ErrorAnswer, model: str) -> LLMError:
    """The squidd error for an error answer of the endpoint to a request for `model`."""
    status = answer.status
    if status in (401, 403):
        return LLMCredentialsError(
            f"the model endpoint rejected the credentials (HTTP {answer.status})"
        )
    if _is_context_overflow(answer):
        # No retry and no fallback model helps: the caller must send less.
        return LLMContextOverflowError(f"the request is longer than model {model}'s context window")
    if status == 429:
        quota = _is_quota(answer)
        reason = "quota exhausted (HTTP 429)" if quota else "rate limited (HTTP 429)"
        return LLMRateLimitedError(reason, retry_after_s=_retry_after(answer.headers), quota=quota)
    if status in _RETRY_STATUSES or status >= 500:
        return LLMUnavailableError(f"HTTP {status}", retry_after_s=_retry_after(answer.headers))
    if status in _NEXT_MODEL_STATUSES:
        return LLMRejectedError(f"rejected by model {model} (HTTP {status})")
    return LLMRejectedError(f"rejected (HTTP {status})")
