"""Trying an LLM endpoint before the daemon runs (`squidd doctor`, `squidd init --interactive`).

`list_models` asks the endpoint which models it serves (`GET /models`); `one_token` makes one
chat request for a single token through the same adapter the daemon uses, with no retry and
no fallback model, so what it reports is what the first turn would meet. Both raise the
adapter's error types (llm/errors.py, llm/status.py): a refused key is `LLMCredentialsError`.

`squidd run` lists the models at every start, over plain httpx2 like a turn's request (the
openai SDK, 0.4 s and 22 MiB, is not loaded, docs/performance.md): an error answer is worded
by llm/status.py and a failure to connect by llm/causes.py, as a turn would meet them.
"""

from __future__ import annotations

from typing import Any

import httpx2

from squidd.config.sections import LLMSettings
from squidd.core.models import Message, TextDelta
from squidd.errors import LLMUnavailableError
from squidd.llm import causes, status
from squidd.llm.http import async_client
from squidd.llm.openai import EndpointClient, RequestOptions, to_openai_message

__all__ = ["list_models", "one_token", "one_token_at"]


_NO_LIST = (404, 405, 501)
"""Statuses of a server without `/models`."""


async def list_models(settings: LLMSettings) -> list[str] | None:
    """The ids the endpoint lists, or None when it has no `/models` (some servers do not)."""
    api_key = settings.api_key.get_secret_value() if settings.api_key else "not-needed"
    timeout = httpx2.Timeout(settings.connect_timeout_s * 2, connect=settings.connect_timeout_s)
    async with async_client(timeout=timeout, follow_redirects=True) as client:
        try:
            response = await client.get(
                f"{settings.base_url.rstrip('/')}/models",
                headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            )
        except httpx2.RequestError as exc:  # what the SDK's table words with `describe`
            raise LLMUnavailableError(causes.describe(exc)) from None
    if response.status_code in _NO_LIST:
        return None
    listed = _ids(response)
    if listed is not None:
        return listed
    if response.is_error:
        answer = status.ErrorAnswer.parse(
            response.status_code, response.headers, response.text.strip()
        )
        raise status.error_of(answer, settings.model)
    raise LLMUnavailableError(f"broken response (HTTP {response.status_code}: no model list)")


def _ids(response: httpx2.Response) -> list[str] | None:
    """The ids of a 2xx model list; None for any other answer."""
    if not response.is_success:
        return None
    try:
        body: Any = response.json()
    except ValueError:
        return None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    ids = [entry.get("id") for entry in data if isinstance(entry, dict)]
    if len(ids) != len(data) or not all(isinstance(i, str) for i in ids):
        return None
    return [str(i) for i in ids]


async def one_token(settings: LLMSettings) -> str:
    """Ask the configured model for one token; return the text it sent (may be empty)."""
    return await one_token_at(
        settings.base_url,
        settings.api_key.get_secret_value() if settings.api_key else None,
        settings.model,
        timeout_s=settings.timeout_s,
        connect_timeout_s=settings.connect_timeout_s,
    )


async def one_token_at(
    base_url: str, api_key: str | None, model: str, *, timeout_s: float, connect_timeout_s: float
) -> str:
    """One request for one token to `model` at one endpoint with one key (no retry)."""
    client = EndpointClient(
        base_url, api_key, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s
    )
    text: list[str] = []
    message = [to_openai_message(Message(role="user", content="Say OK."))]
    try:
        async for event in client.stream(model, message, [], RequestOptions(max_tokens=1)):
            if isinstance(event, TextDelta):
                text.append(event.text)
    finally:
        await client.aclose()
    return "".join(text)
