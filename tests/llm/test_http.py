"""The model endpoints' HTTP clients share one verifying TLS context (llm/http.py)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import httpx2
import httpx2._transports.default as httpx2_transport
import pytest

from squidd.config.media import TranscriptionSettings
from squidd.config.speech import SpeechSettings
from squidd.llm import http
from squidd.llm.embeddings import EmbeddingsClient
from squidd.llm.speech import SpeechClient
from squidd.llm.transcription import WhisperTranscriber

pytestmark = pytest.mark.anyio


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ssl.SSLContext]]:
    """The contexts httpx2 builds from here on (the shared one forgotten first)."""
    contexts: list[ssl.SSLContext] = []
    real = httpx2.create_ssl_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        context = real(*args, **kwargs)
        contexts.append(context)
        return context

    http.tls_context.cache_clear()
    monkeypatch.setattr(httpx2, "create_ssl_context", counting)
    # what a client's transport calls (it imported the function itself)
    monkeypatch.setattr(httpx2_transport, "create_ssl_context", counting)
    yield contexts
    http.tls_context.cache_clear()


async def test_clients_share_one_verifying_context(built: list[ssl.SSLContext]) -> None:
    clients = [
        http.async_client(timeout=5),
        EmbeddingsClient("https://example.invalid/v1", "m", None, timeout_s=5)._client,
        SpeechClient(SpeechSettings(base_url="https://example.invalid/v1"), max_bytes=10)._client,
        WhisperTranscriber(TranscriptionSettings(base_url="https://example.invalid/v1"))._client,
    ]
    try:
        # one built by the shared context's first use; each client given it as it is
        assert len(built) == 1 + len(clients)
        assert all(context is built[0] for context in built)
        shared = built[0]
        assert shared.verify_mode is ssl.CERT_REQUIRED
        assert shared.check_hostname
        assert shared.cert_store_stats() == httpx2.create_ssl_context().cert_store_stats()
    finally:
        for client in clients:
            await client.aclose()


async def test_a_client_with_its_own_verify_still_builds_its_own(
    built: list[ssl.SSLContext],
) -> None:
    own = httpx2.AsyncClient(trust_env=False)
    shared = http.async_client()
    try:
        assert len(built) == 3
        assert built[0] is not built[1]
        assert built[1] is built[2]
    finally:
        await own.aclose()
        await shared.aclose()
