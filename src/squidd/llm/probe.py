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
from squidd.llm.openai import OpenAILLM

__all__ = ["list_models", "one_token"]


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
    tiny = settings.model_copy(update={"max_tokens": 1, "max_retries": 0, "fallback_models": []})
    llm = OpenAILLM(tiny)
    text: list[str] = []
    try:
        async for event in llm.chat([Message(role="user", content="Say OK.")], []):
            if isinstance(event, TextDelta):
                text.append(event.text)
    finally:
        await llm.aclose()
    return "".join(text)
