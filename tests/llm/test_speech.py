"""The speech client against a scripted `/v1/audio/speech` server on 127.0.0.1."""

from __future__ import annotations

import threading

import pytest

from squidd.config.speech import SpeechSettings
from squidd.errors import SpeechError
from squidd.llm.speech import SpeechClient
from squidd.media.voice import read_ogg_opus
from tests.support.speech_server import SpeechServer, seconds_for

pytestmark = pytest.mark.anyio
KEY = "sk-speech-test-key-31"


async def test_the_documented_request_gets_ogg_opus_back() -> None:
    with SpeechServer() as server:
        settings = SpeechSettings(base_url=server.base_url, api_key=KEY, voice="nova")
        client = SpeechClient(settings, max_bytes=1 << 20)
        try:
            audio = await client.speak("Good morning, the kettle is on.")
        finally:
            await client.aclose()
    [heard] = server.heard
    assert heard.path == "/v1/audio/speech"
    assert heard.headers["Authorization"] == f"Bearer {KEY}"
    assert heard.request == {
        "model": "tts-1",
        "input": "Good morning, the kettle is on.",
        "voice": "nova",
        "response_format": "opus",
    }
    expected = seconds_for("Good morning, the kettle is on.") * 1000
    assert abs(read_ogg_opus(audio).duration_ms - expected) <= 1


@pytest.mark.parametrize(
    ("server", "reason"),
    [
        (SpeechServer(status=500), "answered 500"),
        (SpeechServer(status=401), "answered 401"),
        (SpeechServer(body=b"x" * 5000), "over 4096 bytes"),
    ],
)
async def test_failures_are_speech_errors_without_the_key(
    server: SpeechServer, reason: str
) -> None:
    with server:
        client = SpeechClient(SpeechSettings(base_url=server.base_url, api_key=KEY), max_bytes=4096)
        try:
            with pytest.raises(SpeechError, match=reason) as info:
                await client.speak("hello")
        finally:
            await client.aclose()
    assert KEY not in str(info.value)


async def test_a_server_that_does_not_answer_in_time_is_a_timeout() -> None:
    with SpeechServer(hold=threading.Event()) as server:
        settings = SpeechSettings(base_url=server.base_url, timeout_s=0.2)
        client = SpeechClient(settings, max_bytes=1 << 20)
        try:
            with pytest.raises(SpeechError, match="timed out"):
                await client.speak("hello")
        finally:
            await client.aclose()


async def test_an_endpoint_nobody_listens_on_is_unreachable() -> None:
    with SpeechServer() as server:
        url = server.base_url
    client = SpeechClient(SpeechSettings(base_url=url), max_bytes=1 << 20)
    try:
        with pytest.raises(SpeechError, match="unreachable"):
            await client.speak("hello")
    finally:
        await client.aclose()


async def test_too_long_a_text_is_refused_before_any_request() -> None:
    with SpeechServer() as server:
        client = SpeechClient(SpeechSettings(base_url=server.base_url), max_bytes=1 << 20)
        try:
            with pytest.raises(SpeechError, match="4097 characters"):
                await client.speak("x" * 4097)
        finally:
            await client.aclose()
    assert server.heard == []
