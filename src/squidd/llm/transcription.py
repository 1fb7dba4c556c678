"""Voice notes to text through an OpenAI-compatible `/audio/transcriptions` endpoint.

`[transcription]` names the endpoint (OpenAI, a local whisper server, ...). The audio file
is posted as multipart form data with the model name; the answer's `text` is the
transcript. Every failure (no endpoint, refused, unreachable, no text) is a
`TranscriptionError` with a short reason the assistant is told; the key never shows.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import structlog

from squidd.config.media import TranscriptionSettings
from squidd.errors import TranscriptionError
from squidd.llm.http import async_client
from squidd.text import clean_text

log = structlog.get_logger(__name__)


class WhisperTranscriber:
    """Implements the core's `Transcriber` over HTTP."""

    def __init__(
        self, settings: TranscriptionSettings, *, client: httpx2.AsyncClient | None = None
    ) -> None:
        self._settings = settings
        self._client = client or async_client(timeout=settings.timeout_s)

    async def transcribe(self, path: Path, mime: str) -> str:
        settings = self._settings
        if not settings.base_url:
            raise TranscriptionError("no transcription endpoint configured")
        audio = await anyio.to_thread.run_sync(path.read_bytes)
        headers = {}
        if settings.api_key is not None:
            headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        form = {"model": settings.model, "response_format": "json"}
        if settings.language:
            form["language"] = settings.language
        try:
            response = await self._client.post(
                f"{settings.base_url}/audio/transcriptions",
                headers=headers,
                data=form,
                files={"file": (path.name, audio, mime or "application/octet-stream")},
            )
        except httpx2.HTTPError as exc:
            raise TranscriptionError(f"endpoint unreachable: {type(exc).__name__}") from exc
        if response.status_code != 200:
            raise TranscriptionError(f"endpoint answered {response.status_code}")
        try:
            text = response.json().get("text")
        except (ValueError, AttributeError) as exc:
            raise TranscriptionError("endpoint answered no JSON") from exc
        if isinstance(text, str):
            text = clean_text(text)  # a service's words: valid text before anything reads them
        if not isinstance(text, str) or not text.strip():
            raise TranscriptionError("endpoint returned no text")
        log.info("voice_transcribed", chars=len(text))
        return text

    async def aclose(self) -> None:
        await self._client.aclose()
