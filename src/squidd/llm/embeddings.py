"""Texts to vectors through an OpenAI-compatible `POST /v1/embeddings` endpoint.

`[memory.recall] embeddings = "PROVIDER/MODEL"` names a provider of `[[llm.providers]]`:
its OpenAI base URL (a local server's root + /v1, as for chat) and its first key. Ollama,
llama.cpp and vLLM serve the same path and format: `{"model", "input": [...]}` in,
`{"data": [{"index", "embedding"}], "model"}` out. The answer is checked whole (one vector
per text, in index order, all of one length, finite numbers) before anything is stored.

Failures are `squidd.errors` types: unreachable, timed out, 429 and 5xx are
`LLMUnavailableError` (the indexer retries later with backoff); 401/403 are
`LLMCredentialsError`; any other refusal is `LLMRejectedError` (a text the model refuses:
the indexer leaves that one out). No message carries the key. The indexer, not this client,
retries: a background job must not spend the chat chain's breaker budget, so it keeps its
own backoff.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx2

from squidd.config import Settings
from squidd.config.providers import split_entry
from squidd.errors import ConfigError, LLMCredentialsError, LLMRejectedError, LLMUnavailableError
from squidd.llm.http import async_client
from squidd.llm.local import openai_base

__all__ = ["EmbeddingsClient", "embeddings_client"]

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429})


class EmbeddingsClient:
    """One embeddings model on one endpoint; implements the core's `Embedder`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        *,
        timeout_s: float,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        self._url = f"{base_url.rstrip('/')}/embeddings"
        self.model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = http_client or async_client(timeout=timeout_s)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        if not texts:
            return []
        body = {"model": self.model, "input": list(texts)}
        try:
            response = await self._client.post(self._url, json=body, headers=self._headers)
        except httpx2.HTTPError as exc:
            raise LLMUnavailableError(
                f"embeddings endpoint unreachable: {type(exc).__name__}"
            ) from None
        status = response.status_code
        if status in _TRANSIENT_STATUS or status >= 500:
            raise LLMUnavailableError(f"embeddings endpoint answered {status}")
        if status in (401, 403):
            raise LLMCredentialsError(f"embeddings endpoint refused the key ({status})")
        if status != 200:
            raise LLMRejectedError(f"embeddings endpoint refused the request ({status})")
        try:
            data: Any = response.json()
        except ValueError:
            raise LLMUnavailableError("embeddings endpoint answered no JSON") from None
        return _vectors(data, len(texts))

    async def aclose(self) -> None:
        await self._client.aclose()


def _vectors(data: Any, count: int) -> list[list[float]]:
    """The answer's vectors in input order, or `LLMUnavailableError` naming what is wrong."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != count:
        raise LLMUnavailableError("embeddings answer does not hold one vector per text")
    ordered: list[list[float] | None] = [None] * count
    for position, item in enumerate(items):
        index = item.get("index", position) if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < count or not isinstance(vector, list):
            raise LLMUnavailableError("embeddings answer has an item of the wrong shape")
        try:
            ordered[index] = [float(x) for x in vector]
        except (TypeError, ValueError):
            raise LLMUnavailableError("embeddings answer has a non-number") from None
    vectors = [v for v in ordered if v is not None]
    if len(vectors) != count or len({len(v) for v in vectors}) != 1 or not vectors[0]:
        raise LLMUnavailableError("embeddings answer vectors differ in length or are missing")
    if not all(math.isfinite(x) for v in vectors for x in v):
        raise LLMUnavailableError("embeddings answer has a non-finite number")
    return vectors


def embeddings_client(
    settings: Settings, http_client: httpx2.AsyncClient | None = None
) -> EmbeddingsClient | None:
    """The configured embeddings model's client; None when none is configured."""
    recall = settings.memory.recall
    if not recall.embeddings:
        return None
    provider_name, model = split_entry(recall.embeddings)
    providers = {p.name: p for p in settings.llm.resolved_providers()}
    provider = providers.get(provider_name)
    if provider is None:
        raise ConfigError([f"memory.recall.embeddings names no provider {provider_name!r}"])
    key = provider.keys[0].get_secret_value() if provider.keys else None
    return EmbeddingsClient(
        openai_base(provider.kind, provider.base_url),
        model,
        key,
        timeout_s=recall.timeout_s,
        http_client=http_client,
    )
