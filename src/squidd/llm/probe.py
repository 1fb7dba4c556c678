"""Trying an LLM endpoint before the daemon runs (`squidd doctor`, `squidd init --interactive`).

`list_models` asks the endpoint which models it serves (`GET /models`); `one_token` makes one
chat request for a single token through the same adapter the daemon uses, with no retry and
no fallback model, so what it reports is what the first turn would meet. Both raise the
adapter's error types (`squidd.llm.errors`): a refused key is `LLMCredentialsError`.
"""

from __future__ import annotations

import httpx2
from openai import AsyncOpenAI

from squidd.config.sections import LLMSettings
from squidd.core.models import Message, TextDelta
from squidd.llm import errors
from squidd.llm.openai import EndpointClient, RequestOptions, to_openai_message

__all__ = ["list_models", "one_token", "one_token_at"]


async def list_models(settings: LLMSettings) -> list[str] | None:
    """The ids the endpoint lists, or None when it has no `/models` (some servers do not)."""
    api_key = settings.api_key.get_secret_value() if settings.api_key else "not-needed"
    client = AsyncOpenAI(
        api_key=api_key,
        base_url=settings.base_url,
        timeout=httpx2.Timeout(settings.connect_timeout_s * 2, connect=settings.connect_timeout_s),
        max_retries=0,
    )
    try:
        page = await client.models.list()
        return [model.id async for model in page]
    except errors.CAUGHT as exc:
        if getattr(exc, "status_code", None) in (404, 405, 501):
            return None
        error = errors.translate(exc, settings.model)
        if error is None:
            raise
        raise error from None
    finally:
        await client.close()


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
