"""The transcription client against a scripted server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.config.media import TranscriptionSettings
from squidd.errors import TranscriptionError
from squidd.llm.transcription import WhisperTranscriber
from tests.support.media_files import wav_tone
from tests.support.transcription_server import TranscriptionServer

pytestmark = pytest.mark.anyio
KEY = "sk-transcription-test-key-77"


async def test_the_audio_is_posted_and_the_text_returned(tmp_path: Path) -> None:
    audio = tmp_path / "note.wav"
    audio.write_bytes(wav_tone())
    with TranscriptionServer(text="remind me at five") as server:
        settings = TranscriptionSettings(
            base_url=server.base_url, api_key=KEY, model="whisper-small", language="en"
        )
        client = WhisperTranscriber(settings)
        try:
            assert await client.transcribe(audio, "audio/wav") == "remind me at five"
        finally:
            await client.aclose()
    [heard] = server.heard
    assert heard.path == "/v1/audio/transcriptions"
    assert heard.headers["Authorization"] == f"Bearer {KEY}"
    assert heard.fields["model"] == "whisper-small" and heard.fields["language"] == "en"
    assert (heard.file_name, heard.file_type, heard.file_bytes) == (
        "note.wav",
        "audio/wav",
        audio.read_bytes(),
    )


@pytest.mark.parametrize(
    ("status", "text", "reason"),
    [
        (500, "x", "endpoint answered 500"),
        (200, "  ", "endpoint returned no text"),
    ],
)
async def test_failures_are_transcription_errors_without_the_key(
    tmp_path: Path, status: int, text: str, reason: str
) -> None:
    audio = tmp_path / "note.wav"
    audio.write_bytes(wav_tone())
    with TranscriptionServer(text=text, status=status) as server:
        client = WhisperTranscriber(TranscriptionSettings(base_url=server.base_url, api_key=KEY))
        try:
            with pytest.raises(TranscriptionError) as info:
                await client.transcribe(audio, "audio/wav")
        finally:
            await client.aclose()
    assert str(info.value) == reason and KEY not in str(info.value)


async def test_an_unreachable_endpoint_is_a_transcription_error(tmp_path: Path) -> None:
    audio = tmp_path / "note.wav"
    audio.write_bytes(wav_tone())
    with TranscriptionServer() as server:
        url = server.base_url
    client = WhisperTranscriber(TranscriptionSettings(base_url=url))
    try:
        with pytest.raises(TranscriptionError, match="endpoint unreachable"):
            await client.transcribe(audio, "audio/wav")
    finally:
        await client.aclose()


async def test_a_transcript_is_valid_text(tmp_path: Path) -> None:
    audio = tmp_path / "note.wav"
    audio.write_bytes(wav_tone())
    # JSON escapes of a lone surrogate, NUL and ESC, as a broken endpoint may send them
    with TranscriptionServer(text="remind \ud800me\x00 at\x1b[2J five") as server:
        client = WhisperTranscriber(TranscriptionSettings(base_url=server.base_url, api_key=KEY))
        try:
            assert await client.transcribe(audio, "audio/wav") == "remind \ufffdme at[2J five"
        finally:
            await client.aclose()
