"""Text to speech through an OpenAI-compatible `/audio/speech` endpoint.

`[speech]` names the endpoint (OpenAI, or a local Piper or Kokoro server speaking the same
API). One request per part of an answer: a JSON body with `model`, `input`, `voice` and
`response_format: "opus"`, answered with the audio's bytes (Ogg/Opus; `media/voice.py`
checks them). The answer is read as a stream and refused past `max_bytes`, so a server that
sends without end cannot fill the memory. Every failure (unreachable, timed out, an error
status, too large) is a `SpeechError` with a short reason; the key never shows in it.
`SpeechHealth` keeps what was spoken and the last failure since start (`squidd status`);
the voice replies report to it, as they also see the failures past the endpoint (bytes
that are not Ogg/Opus, a cap).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2
import structlog

from squidd.config.speech import SPEECH_INPUT_LIMIT, SpeechSettings
from squidd.core.models import utcnow
from squidd.errors import SpeechError
from squidd.llm.http import async_client

__all__ = ["SpeechClient", "SpeechHealth"]

log = structlog.get_logger(__name__)

# Every httpx2 failure of one request, as the words a person reads in status.
_FAILURES: tuple[tuple[type[httpx2.HTTPError], str], ...] = (
    (httpx2.TimeoutException, "timed out"),
    (httpx2.ConnectError, "is unreachable"),
    (httpx2.TransportError, "dropped the connection"),
    (httpx2.HTTPError, "failed"),
)


@dataclass
class SpeechHealth:
    """Answers spoken and failures since start, for `squidd status`."""

    enabled: bool
    spoken: int = 0
    failed: int = 0
    last_failure: dict[str, str] | None = None
    last_spoken_at: str | None = None

    def ok(self) -> None:
        self.spoken += 1
        self.last_spoken_at = _now()

    def failure(self, reason: str) -> None:
        self.failed += 1
        self.last_failure = {"at": _now(), "reason": reason}

    def snapshot(self) -> dict[str, object]:
        return {
            "enabled": self.enabled,
            "spoken": self.spoken,
            "failed": self.failed,
            "last_spoken_at": self.last_spoken_at,
            "last_failure": self.last_failure,
        }


def _now() -> str:
    return utcnow().isoformat(timespec="seconds")


class SpeechClient:
    """Speaks one text at a time; `speak` returns the endpoint's audio bytes."""

    def __init__(
        self,
        settings: SpeechSettings,
        *,
        max_bytes: int,
        client: httpx2.AsyncClient | None = None,
    ) -> None:
        self._settings = settings
        self._max_bytes = max_bytes
        self._client = client or async_client(timeout=settings.timeout_s)
        self.health = SpeechHealth(enabled=bool(settings.base_url))

    async def speak(self, text: str) -> bytes:
        settings = self._settings
        if not settings.base_url:
            raise SpeechError("no speech endpoint configured")
        if not text.strip() or len(text) > SPEECH_INPUT_LIMIT:
            raise SpeechError(f"cannot speak {len(text)} characters in one request")
        headers = {"Accept": "audio/ogg"}
        if settings.api_key is not None:
            headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        body = {
            "model": settings.model,
            "input": text,
            "voice": settings.voice,
            "response_format": settings.format,
        }
        try:
            async with self._client.stream(
                "POST", f"{settings.base_url}/audio/speech", headers=headers, json=body
            ) as response:
                if response.status_code != 200:
                    raise SpeechError(f"the speech endpoint answered {response.status_code}")
                audio = bytearray()
                async for chunk in response.aiter_bytes():
                    audio += chunk
                    if len(audio) > self._max_bytes:
                        raise SpeechError(f"the speech endpoint sent over {self._max_bytes} bytes")
        except httpx2.HTTPError as exc:
            reason = next(words for kind, words in _FAILURES if isinstance(exc, kind))
            raise SpeechError(f"the speech endpoint {reason} ({type(exc).__name__})") from None
        log.info("speech_made", chars=len(text), size=len(audio))
        return bytes(audio)

    async def aclose(self) -> None:
        await self._client.aclose()
